import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// Register and Login: a small pool of threads hashes and checks passwords
/// (Argon2id takes tens of milliseconds and 19 MiB each), and asks the
/// customer shards, step by step, for what they own. A request is admitted
/// before it is queued (`submit`): checked, throttled (AccountAdmission,
/// its check reserved so pipelined attempts cannot overrun a limit) and
/// queued behind its own uid's other requests only (FairQueue), so one uid
/// cannot fill the queue for another.
/// A login with a guest session seals the guest (its shard), merges its
/// carts into the account (the account's shard, once per guest), then
/// removes the guest: a crash between the steps leaves a sealed guest that
/// the next start merges (`finishMerges`), so no line is lost or doubled.
final class AccountService: Sendable {
    private let shards: [CustomerShard]
    private let rules: AccountRules
    private let waiting: Locked<FairQueue<Admitted>>
    /// One element per job put in `waiting`: what the threads block on.
    private let ready = BlockingQueue<UInt8>()
    /// Before `start`, steps run on the calling thread (tests, the fuzz harness).
    private let started = Atomic<Bool>(false)
    private let admission: Locked<AccountAdmission>
    private let threads = Locked<[OSThread]>([])
    private let logger: Logger
    /// The hash an unknown email's password is checked against, so that it
    /// costs what a known one's does.
    private let decoy: String
    let workerCount: Int
    /// Logins and registrations one peer uid may have waiting for a thread.
    static let queueLimitPerPeer = 64
    /// Logins and registrations waiting for a thread, over all uids.
    static let queueLimit = 1024
    /// How long a step may wait for its shard before the request fails.
    static let stepTimeoutNanoseconds: UInt64 = 30_000_000_000

    /// A job let through with the attempt it reserved.
    struct Admitted: Sendable {
        var job: CommerceJob
        var ticket: AccountAdmission.Ticket
    }

    init(shards: [CustomerShard], rules: AccountRules, throttle: LoginThrottle.Limits, workers: Int, logger: Logger) {
        self.shards = shards
        self.rules = rules
        admission = Locked(AccountAdmission(throttle))
        waiting = Locked(FairQueue(perPeer: Self.queueLimitPerPeer, total: Self.queueLimit))
        self.logger = logger
        workerCount = max(1, workers)
        decoy = PasswordHash.make((try? KernelRandom.hex(16)) ?? "groser decoy password") ?? ""
    }

    static func handles(_ method: RequestMethod) -> Bool {
        method.field?.executor == .accountWorkers
    }

    func start() throws(Errno) {
        self.started.store(true, ordering: .releasing)
        var started: [OSThread] = []
        for i in 0..<workerCount {
            started.append(try OSThread(name: "groserd-auth\(i)") { [self] in
                while !ready.take(upTo: 1).isEmpty {
                    guard let next = waiting.withLock({ $0.pop() }) else { continue }
                    if next.job.connection?.isClosed == true {
                        finish(next.ticket, .undecided)
                        continue
                    }
                    next.job.reply(frame(for: next))
                }
            })
        }
        threads.withLock { $0 = started }
    }

    /// Admits and queues a Register or Login; answers at once when it is
    /// refused (bad input, throttled, its uid's queue full). False when stopping.
    func submit(_ job: CommerceJob) -> Bool {
        let ticket: AccountAdmission.Ticket
        switch admit(job) {
        case .success(let t): ticket = t
        case .failure(let refusal):
            var out: [UInt8] = []
            ResponseFrameWriter.appendStatus(id: job.request.id, status: refusal.status, to: &out)
            job.reply(out)
            return true
        }
        let peer = job.caller.uid
        if let full = waiting.withLock({ $0.push(Admitted(job: job, ticket: ticket), peer: peer) }) {
            finish(ticket, .notQueued)
            let sentence = full == .peerFull
                ? "This user has \(Self.queueLimitPerPeer) logins and registrations waiting already; try again when they are answered."
                : "Too many logins and registrations are waiting; try again in a moment."
            var out: [UInt8] = []
            ResponseFrameWriter.appendStatus(id: job.request.id, status: Status(.resourceExhausted, sentence), to: &out)
            job.reply(out)
            return true
        }
        return ready.put(0)
    }

    func stop() {
        ready.close()
        for t in threads.withLock({ t in defer { t.removeAll() }; return t }) { t.join() }
    }

    /// Checks the request and reserves its attempt (AccountAdmission), on
    /// the caller's thread: nothing refused here costs a hash or a place
    /// in the queue.
    private func admit(_ job: CommerceJob) -> Result<AccountAdmission.Ticket, Refusal> {
        let attempt: AccountAdmission.Attempt
        do throws(Refusal) {
            switch job.request.method {
            case .register(let r):
                let (email, _) = try rules.check(r)
                attempt = .registration(email: email)
            case .login(let d):
                if let refusal = FieldLimits.violation(in: job.request.method) { throw refusal }
                attempt = .login(email: try rules.check(d), session: d.guestSession)
            default:
                throw Refusal(.unimplemented, "The account service does not answer this method.")
            }
        } catch {
            return .failure(error)
        }
        let now = monotonicNanoseconds() / 1_000_000
        return admission.withLock { $0.admit(attempt, peer: job.caller.uid, nowMillis: now) }
    }

    private func finish(_ ticket: AccountAdmission.Ticket, _ verdict: AccountAdmission.Verdict) {
        let now = monotonicNanoseconds() / 1_000_000
        admission.withLock { $0.finish(ticket, verdict, nowMillis: now) }
    }

    /// The response frame for an admitted Register or Login (on a pool thread).
    private func frame(for admitted: Admitted) -> [UInt8] {
        var out: [UInt8] = []
        if let refusal = Dispatcher.deadlineRefusal(admitted.job.request, receivedAt: admitted.job.receivedAt) {
            finish(admitted.ticket, .undecided)
            ResponseFrameWriter.appendStatus(id: admitted.job.request.id, status: refusal, to: &out)
            return out
        }
        switch outcome(of: admitted) {
        case .ok(let field, let body): ResponseFrameWriter.appendOK(id: admitted.job.request.id, field: field, body: body, to: &out)
        case .failed(let status): ResponseFrameWriter.appendStatus(id: admitted.job.request.id, status: status, to: &out)
        }
        return out
    }

    /// Admits and answers a Register or Login on the calling thread (tests,
    /// the fuzz harness, before `start`).
    func outcome(for job: CommerceJob) -> CommerceOutcome {
        switch admit(job) {
        case .success(let ticket): return outcome(of: Admitted(job: job, ticket: ticket))
        case .failure(let refusal): return .failed(refusal.status)
        }
    }

    private func outcome(of admitted: Admitted) -> CommerceOutcome {
        var verdict = AccountAdmission.Verdict.undecided
        defer { finish(admitted.ticket, verdict) }
        do {
            let (field, body) = try answer(admitted.job, &verdict)
            return .ok(field, body)
        } catch {
            return .failed(error.status)
        }
    }

    /// The account of `email`, or of the form it was registered in before
    /// emails were normalised to NFC (`legacy`, when that differs): such an
    /// account is kept under that form's key.
    private func account(_ email: String, legacy: String, _ job: CommerceJob) throws(Refusal) -> (SessionKey, AccountRecord?) {
        let owner = SessionKey(accountEmail: email)
        guard case .credentials(let record) = try call(owner, .credentials(owner: owner), job) else {
            throw Refusal(.internal, "The account's shard gave a wrong answer.")
        }
        if record != nil || Array(legacy.utf8) == Array(email.utf8) { return (owner, record) }
        let old = SessionKey(accountEmail: legacy)
        guard case .credentials(let oldRecord) = try call(old, .credentials(owner: old), job) else {
            throw Refusal(.internal, "The account's shard gave a wrong answer.")
        }
        return oldRecord == nil ? (owner, nil) : (old, oldRecord)
    }

    private func answer(_ job: CommerceJob, _ verdict: inout AccountAdmission.Verdict) throws(Refusal) -> (MethodField, [UInt8]) {
        switch job.request.method {
        case .register(let r):
            let (email, name) = try rules.check(r)
            // A taken email is answered without a hash: the answer says so
            // anyway (§7A.1), and the uid's throttle bounds how fast.
            if try account(email, legacy: AccountRules.legacyNormalizedEmail(r.email), job).1 != nil {
                verdict = .failed
                throw AccountRules.emailTaken
            }
            guard let hash = PasswordHash.make(r.password) else {
                throw Refusal(.resourceExhausted, "The password could not be hashed (out of memory); try again.")
            }
            let owner = SessionKey(accountEmail: email)
            let record = AccountRecord(email: email, name: name, passwordHash: hash, createdAtUnix: shards[0].context.unixTime())
            let created: AccountStepAnswer
            do {
                created = try call(owner, .register(owner: owner, record), job)
            } catch {
                if error.status.code == .alreadyExists { verdict = .failed }
                throw error
            }
            guard case .account(let account) = created else {
                throw Refusal(.internal, "Register got a wrong answer from its shard.")
            }
            verdict = .succeeded
            logger.info("an account was registered")
            return (.register, BodyEncoder.register(account))

        case .login(let d):
            let email = try rules.check(d)
            let (owner, record) = try account(email, legacy: AccountRules.legacyNormalizedEmail(d.email), job)
            // An unknown email costs one Argon2id check too.
            let good = PasswordHash.verify(d.password, hash: record?.passwordHash ?? decoy) && record != nil
            guard good else {
                verdict = .failed
                throw Refusal(.unauthenticated, "The email or password is wrong.")
            }
            verdict = .succeeded
            // The login's new session counts toward the uid's share of
            // stored sessions, as an anonymous one's first change does.
            let share = shards[0].context.storedShare
            if let share, !share.admit(job.caller.uid) { throw share.refusal }
            var stored = false
            defer { if !stored { share?.refund(job.caller.uid) } }
            var guest: SessionKey?
            var carts: [String: StoredCart] = [:]
            if !d.guestSession.isEmpty {
                let g = SessionKey(token: d.guestSession)
                if case .guestCarts(let found?) = try call(g, .seal(guest: g, owner: owner), job) {
                    guest = g
                    carts = found
                }
            }
            guard case .login(let result) = try call(owner, .merge(owner: owner, guest: guest, carts: carts,
                                                                    idempotencyKey: d.idempotencyKey,
                                                                    fingerprint: "login|" + (d.guestSession.isEmpty ? "" : SessionKey(token: d.guestSession).hex),
                                                                    newSession: true), job) else {
                throw Refusal(.internal, "Login got a wrong answer from its shard.")
            }
            stored = true
            if let guest {
                // The merge is durable; a failure here leaves a sealed guest
                // that the next start removes.
                _ = try? call(guest, .removeSealed(guest: guest), job)
            }
            return (.login, BodyEncoder.login(result))

        default:
            throw Refusal(.unimplemented, "The account service does not answer this method.")
        }
    }
    /// Runs `step` on the shard that owns `key` and waits for its outcome.
    private func call(_ key: SessionKey, _ step: AccountStep, _ job: CommerceJob) throws(Refusal) -> AccountStepAnswer {
        let shard = shards[key.shard(of: shards.count)]
        if !started.load(ordering: .acquiring) {
            switch shard.runNow(step, for: job.request) {
            case .answer(let a): return a
            case .failed(let status): throw Refusal(status.code, status.message)
            }
        }
        let box = BlockingQueue<AccountStepOutcome>()
        var carrier = job
        carrier.connection = nil
        guard shard.submit(ShardJob(job: carrier, key: nil, step: AccountStepCall(step: step) { box.put($0) })) else {
            throw Refusal(.unavailable, "groserd is stopping; try again.")
        }
        guard let outcome = box.take(upTo: 1, timeoutNanoseconds: Self.stepTimeoutNanoseconds).first else {
            throw Refusal(.unavailable, "The account's shard did not answer in time; try again.")
        }
        switch outcome {
        case .answer(let a): return a
        case .failed(let status): throw Refusal(status.code, status.message)
        }
    }

    /// Finishes the merges a crash interrupted (guests sealed, not removed):
    /// before the shards' threads start.
    static func finishMerges(_ shards: [CustomerShard], logger: Logger) {
        let request = Request(id: 0, method: .unknown)
        var finished = 0
        for shard in shards {
            for (guest, owner, carts) in shard.sealedGuests() {
                let home = shards[owner.shard(of: shards.count)]
                if case .failed(let status) = home.runNow(.merge(owner: owner, guest: guest, carts: carts, idempotencyKey: "",
                                                                 fingerprint: "", newSession: false), for: request) {
                    logger.warning("cannot finish the merge of a guest session into its account: \(status.message)")
                    continue
                }
                _ = shard.runNow(.removeSealed(guest: guest), for: request)
                finished += 1
            }
        }
        if finished > 0 { logger.info("finished \(finished) guest cart merge(s) that a stop had interrupted") }
    }
}
