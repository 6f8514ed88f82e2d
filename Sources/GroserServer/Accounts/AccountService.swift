import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// Register and Login: a small pool of threads hashes and checks passwords
/// (Argon2id takes tens of milliseconds and 19 MiB each), throttles failed
/// logins, and asks the customer shards, step by step, for what they own.
/// A login with a guest session seals the guest (its shard), merges its
/// carts into the account (the account's shard, once per guest), then
/// removes the guest: a crash between the steps leaves a sealed guest that
/// the next start merges (`finishMerges`), so no line is lost or doubled.
final class AccountService: Sendable {
    private let shards: [CustomerShard]
    private let rules: AccountRules
    private let queue = BlockingQueue<CommerceJob>()
    private let waiting = Atomic<Int>(0)
    /// Before `start`, steps run on the calling thread (tests, the fuzz harness).
    private let started = Atomic<Bool>(false)
    private let throttle: Locked<LoginThrottle>
    private let threads = Locked<[OSThread]>([])
    private let logger: Logger
    /// The hash an unknown email's password is checked against, so that it
    /// costs what a known one's does.
    private let decoy: String
    let workerCount: Int
    /// Logins and registrations waiting for a thread, at most.
    static let queueLimit = 64
    /// How long a step may wait for its shard before the request fails.
    static let stepTimeoutNanoseconds: UInt64 = 30_000_000_000

    init(shards: [CustomerShard], rules: AccountRules, throttle: LoginThrottle.Limits, workers: Int, logger: Logger) {
        self.shards = shards
        self.rules = rules
        self.throttle = Locked(LoginThrottle(throttle))
        self.logger = logger
        workerCount = max(1, workers)
        decoy = PasswordHash.make((try? KernelRandom.hex(16)) ?? "groser decoy password") ?? ""
    }

    static func handles(_ method: RequestMethod) -> Bool {
        method.field?.info.executor == .accountWorkers
    }

    func start() throws(Errno) {
        self.started.store(true, ordering: .releasing)
        var started: [OSThread] = []
        for i in 0..<workerCount {
            started.append(try OSThread(name: "groserd-auth\(i)") { [self] in
                while true {
                    let jobs = queue.take(upTo: 1)
                    guard let job = jobs.first else { return }
                    waiting.subtract(1, ordering: .relaxed)
                    if job.connection?.isClosed == true { continue }
                    job.reply(frame(for: job))
                }
            })
        }
        threads.withLock { $0 = started }
    }

    /// Queues a Register or Login; answers RESOURCE_EXHAUSTED at once when
    /// too many wait. False when stopping.
    func submit(_ job: CommerceJob) -> Bool {
        if waiting.add(1, ordering: .relaxed).newValue > Self.queueLimit {
            waiting.subtract(1, ordering: .relaxed)
            var out: [UInt8] = []
            ResponseFrameWriter.appendStatus(id: job.request.id, status: Status(.resourceExhausted,
                "Too many logins and registrations are waiting; try again in a moment."), to: &out)
            job.reply(out)
            return true
        }
        guard queue.put(job) else {
            waiting.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func stop() {
        queue.close()
        for t in threads.withLock({ t in defer { t.removeAll() }; return t }) { t.join() }
    }

    /// The response frame for a Register or Login (on a pool thread).
    func frame(for job: CommerceJob) -> [UInt8] {
        var expired: [UInt8] = []
        if RequestHandler.expired(job.request, receivedAt: job.receivedAt, into: &expired) { return expired }
        var out: [UInt8] = []
        switch outcome(for: job) {
        case .ok(let field, let body): ResponseFrameWriter.appendOK(id: job.request.id, field: field, body: body, to: &out)
        case .failed(let status): ResponseFrameWriter.appendStatus(id: job.request.id, status: status, to: &out)
        }
        return out
    }

    func outcome(for job: CommerceJob) -> CommerceOutcome {
        do {
            let (field, body) = try answer(job)
            return .ok(field, body)
        } catch {
            return .failed(error.status)
        }
    }

    private func answer(_ job: CommerceJob) throws(Refusal) -> (MethodField, [UInt8]) {
        switch job.request.method {
        case .register(let r):
            let (email, name) = try rules.check(r)
            guard let hash = PasswordHash.make(r.password) else {
                throw Refusal(.resourceExhausted, "The password could not be hashed (out of memory); try again.")
            }
            let owner = SessionKey(accountEmail: email)
            let record = AccountRecord(email: email, name: name, passwordHash: hash, createdAtUnix: shards[0].context.unixTime())
            guard case .account(let account) = try call(owner, .register(owner: owner, record), job) else {
                throw Refusal(.internal, "Register got a wrong answer from its shard.")
            }
            logger.info("an account was registered")
            return (.register, BodyEncoder.register(account))

        case .login(let d):
            if let refusal = FieldLimits.violation(in: job.request.method) { throw refusal }
            let email = try rules.check(d)
            let peer = job.caller.uid
            let now = monotonicNanoseconds() / 1_000_000
            let wait = throttle.withLock { $0.wait(account: email, peer: peer, nowMillis: now) }
            if wait > 0 {
                let seconds = (wait + 999) / 1000
                throw Refusal(.resourceExhausted, "Too many failed logins; try again in \(seconds) s.")
            }
            let owner = SessionKey(accountEmail: email)
            guard case .credentials(let record) = try call(owner, .credentials(owner: owner), job) else {
                throw Refusal(.internal, "Login got a wrong answer from its shard.")
            }
            // An unknown email costs one Argon2id check too.
            let good = PasswordHash.verify(d.password, hash: record?.passwordHash ?? decoy) && record != nil
            guard good else {
                throttle.withLock { $0.failed(account: email, peer: peer, nowMillis: monotonicNanoseconds() / 1_000_000) }
                throw Refusal(.unauthenticated, "The email or password is wrong.")
            }
            throttle.withLock { $0.succeeded(account: email) }
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
