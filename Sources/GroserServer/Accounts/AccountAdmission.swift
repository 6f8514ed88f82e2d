/// Whether a Register or Login may be queued for hashing now: the failure
/// throttle (LoginThrottle) for both, and for Register the uid's rate
/// (RegistrationRate). An admitted request holds a ticket, its attempt
/// reserved, until `finish` says how it ended. A pure value with the clock
/// passed in; the account service holds it under one lock, so a check and
/// its reservation are one step.
struct AccountAdmission: Sendable {
    /// What a request asks, its email normalised.
    enum Attempt: Sendable {
        /// `session`: the anonymous session the login carries ("" for none).
        case login(email: String, session: String)
        case registration(email: String)
    }

    /// An admitted request's reservation.
    struct Ticket: Sendable {
        let attempt: LoginThrottle.Attempt
        let isRegistration: Bool
        let peer: UInt32?
    }

    /// How an admitted request ended.
    enum Verdict: Sendable {
        /// Logged in, or registered.
        case succeeded
        /// A wrong password or unknown email, or a taken email to register.
        case failed
        /// Not decided (its deadline passed, its connection closed, a shard
        /// did not answer): the reservation just ends.
        case undecided
        /// Refused by the queue after admission: as if never admitted.
        case notQueued
    }

    private(set) var throttle: LoginThrottle
    private(set) var registrations: RegistrationRate

    init(_ limits: LoginThrottle.Limits) {
        throttle = LoginThrottle(limits)
        registrations = RegistrationRate(perMinute: limits.registrationsPerMinute)
    }

    /// Whole seconds, rounded up, for a refusal's sentence.
    private static func seconds(_ millis: UInt64) -> UInt64 { max(1, (millis + 999) / 1000) }

    /// Reserves `attempt` from `peer`, or the refusal (RESOURCE_EXHAUSTED,
    /// naming the wait) when it must wait.
    mutating func admit(_ attempt: Attempt, peer: UInt32?, nowMillis now: UInt64) -> Result<Ticket, Refusal> {
        switch attempt {
        case .login(let email, let session):
            let a = LoginThrottle.Attempt.login(account: email, peer: peer, session: session)
            if let wait = throttle.reserve(a, nowMillis: now) {
                return .failure(Refusal(.resourceExhausted, "Too many failed logins; try again in \(Self.seconds(wait)) s."))
            }
            return .success(Ticket(attempt: a, isRegistration: false, peer: peer))
        case .registration(let email):
            let a = LoginThrottle.Attempt.registration(account: email, peer: peer)
            if let wait = throttle.reserve(a, nowMillis: now) {
                return .failure(Refusal(.resourceExhausted,
                                        "Too many failed registrations and logins from this user; try again in \(Self.seconds(wait)) s."))
            }
            if let wait = registrations.take(peer: peer, nowMillis: now) {
                throttle.finish(a, failed: nil, nowMillis: now)
                return .failure(Refusal(.resourceExhausted,
                                        "This user may register \(registrations.perMinute) accounts a minute; try again in \(Self.seconds(wait)) s."))
            }
            return .success(Ticket(attempt: a, isRegistration: true, peer: peer))
        }
    }

    /// Ends a ticket's reservation with how its request ended.
    mutating func finish(_ ticket: Ticket, _ verdict: Verdict, nowMillis now: UInt64) {
        switch verdict {
        case .succeeded: throttle.finish(ticket.attempt, failed: false, nowMillis: now)
        case .failed: throttle.finish(ticket.attempt, failed: true, nowMillis: now)
        case .undecided: throttle.finish(ticket.attempt, failed: nil, nowMillis: now)
        case .notQueued:
            throttle.finish(ticket.attempt, failed: nil, nowMillis: now)
            if ticket.isRegistration { registrations.giveBack(peer: ticket.peer, nowMillis: now) }
        }
    }
}
