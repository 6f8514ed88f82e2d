import Glibc
import GroserStorage
import GroserSystem
import GroserWire

/// Customers' sessions, carts and remembered answers, held in memory by a
/// fixed number of shards (a session belongs to the shard its key hashes
/// to), each with its own log under `<data>/customers/shard-N`. See
/// docs/STORAGE.md.
public final class CustomerService: Sendable {
    let shards: [CustomerShard]
    private let threads = Locked<[OSThread]>([])
    private let compactions = BlockingQueue<Int>()
    private let logger: Logger
    let accounts: AccountService
    /// Answers OpenSession (no shard stores anything for it).
    let opener: SessionOpener
    /// Batches made durable across the shards (they share one).
    var durability: DurabilityStats { shards[0].context.durability }

    public struct Options: Sendable {
        public var directory: String
        /// Used only when `directory` holds no shards yet.
        public var shards: Int
        public var segmentBytes: Int
        public var lifetimes: CustomerLifetimes
        public var limits: CartLimits
        public var loginThrottle: LoginThrottle.Limits
        public var sessions: SessionLimits
        public init(directory: String, shards: Int = 2, segmentBytes: Int = 64 << 20,
                    lifetimes: CustomerLifetimes = CustomerLifetimes(), limits: CartLimits = CartLimits(),
                    loginThrottle: LoginThrottle.Limits = LoginThrottle.Limits(), sessions: SessionLimits = SessionLimits()) {
            self.loginThrottle = loginThrottle
            self.sessions = sessions
            self.directory = directory
            self.shards = shards
            self.segmentBytes = segmentBytes
            self.lifetimes = lifetimes
            self.limits = limits
        }
    }

    /// The file that fixes the number of shards of a data directory:
    /// sessions are placed by it, so it never changes after the first start.
    static let layoutFile = "shards"

    /// Shards over `stores` (one each, in order): rebuilds each one's state
    /// in parallel.
    public init(stores: [any CustomerStore], rules: CartRules, lifetimes: CustomerLifetimes, catalog: CatalogService,
                orders: any CommerceStore,
                products: @escaping @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?,
                logger: Logger, loginThrottle: LoginThrottle.Limits = LoginThrottle.Limits(),
                sessionLimits: SessionLimits = SessionLimits(), sessionSecret: [UInt8]? = nil,
                health: StoreHealth = StoreHealth(.sqlite),
                yearMonth: @escaping @Sendable () -> (year: Int, month: Int) = localYearMonth,
                unixTime: @escaping @Sendable () -> Int64 = wallClockSeconds) throws(StorageError) {
        self.logger = logger
        var context = ShardContext(rules: rules, catalog: catalog, orders: orders, products: products,
                                   lifetimes: lifetimes, yearMonth: yearMonth, unixTime: unixTime, logger: logger,
                                   health: health)
        let count = stores.count
        let tokenLifetime = max(1, min(sessionLimits.unstoredLifetime, lifetimes.idleSessions))
        context.tokens = sessionSecret.map { SessionTokens(secret: $0, lifetime: tokenLifetime) } ?? .random(lifetime: tokenLifetime)
        context.maximumStoredPerShard = max(1, sessionLimits.maximumStored / max(1, count))
        context.storedShare = StoredSessionShare(maximumStored: sessionLimits.maximumStored,
                                                 idleLifetimeSeconds: lifetimes.idleSessions, exempt: [0, getuid()])
        opener = SessionOpener(tokens: context.tokens, limits: sessionLimits, unixTime: unixTime)
        shards = stores.enumerated().map { CustomerShard(index: $0.offset, count: count, store: $0.element, context: context) }
        accounts = AccountService(shards: shards, rules: AccountRules(limits: rules.limits), throttle: loginThrottle,
                                  workers: 2, logger: logger)
        let started = monotonicNanoseconds()
        let results = Locked<[Int: Result<String, StorageError>]>([:])
        var loaders: [OSThread] = []
        for shard in shards {
            let s = shard
            do {
                loaders.append(try OSThread(name: "groserd-load\(s.index)") {
                    let r = Result { () throws(StorageError) -> String in try s.load() }
                    results.withLock { $0[s.index] = r }
                })
            } catch {
                throw StorageError("cannot start a thread to load the customer log: \(error)")
            }
        }
        for t in loaders { t.join() }
        for i in 0..<count {
            switch results.withLock({ $0[i] }) {
            case .success(let line)?: logger.info(line)
            case .failure(let error)?: throw error
            case nil: throw StorageError("shard \(i) did not load")
            }
        }
        AccountService.finishMerges(shards, logger: logger)
        logger.info("customer state loaded in \((monotonicNanoseconds() - started) / 1_000_000) ms: \(shards.reduce(0) { $0 + $1.sessionCount }) session(s) in \(count) shard(s)")
        catalog.subscribe { [shards] change in for s in shards { s.catalogChanged(change) } }
        for s in shards {
            s.checkpointRequested = { [compactions] shard in compactions.put(shard.index) }
        }
    }

    /// groserd's shards: a log per shard under `options.directory`, the
    /// catalog's database for checkout, orders and product facts. Moves
    /// what an older groserd kept in the database into the logs.
    public convenience init(_ options: Options, catalog: CatalogService, orders: SQLiteCatalogStore, logger: Logger,
                            yearMonth: @escaping @Sendable () -> (year: Int, month: Int) = localYearMonth,
                            unixTime: @escaping @Sendable () -> Int64 = wallClockSeconds) throws(StorageError) {
        let count = try Self.shardCount(options, logger)
        let stores: [any CustomerStore] = (0..<count).map {
            CustomerLog(directory: options.directory + "/shard-\($0)", segmentBytes: options.segmentBytes)
        }
        try self.init(stores: stores, rules: CartRules(limits: options.limits), lifetimes: options.lifetimes,
                      catalog: catalog, orders: orders, products: { (uid) throws(StorageError) in try orders.productFacts(uid) },
                      logger: logger, loginThrottle: options.loginThrottle, sessionLimits: options.sessions,
                      sessionSecret: try SessionTokens.secret(inDirectory: options.directory),
                      yearMonth: yearMonth, unixTime: unixTime)
        let legacy = try orders.legacyCustomerRecords(nowUnix: unixTime())
        if !legacy.isEmpty {
            var byShard = [[CustomerRecord]](repeating: [], count: count)
            for r in legacy { byShard[r.key.shard(of: count)].append(r) }
            for (i, records) in byShard.enumerated() { try shards[i].adopt(records) }
            try orders.removeLegacyCustomers()
            logger.info("moved \(legacy.count) session, cart and answer record(s) from the database into the customer log")
        }
    }

    /// groserd's shards over a PostgreSQL database several groserd share
    /// (`--store`): memory is a cache, each batch one transaction there.
    /// `health` hears of the shards' round trips, failures, conflicts and reconnects.
    public convenience init(sharedStore conninfo: String, _ options: Options, catalog: CatalogService,
                            orders: any CommerceStore,
                            products: @escaping @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?,
                            logger: Logger, health: StoreHealth = StoreHealth(.postgresql),
                            yearMonth: @escaping @Sendable () -> (year: Int, month: Int) = localYearMonth,
                            unixTime: @escaping @Sendable () -> Int64 = wallClockSeconds) throws(StorageError) {
        let stores: [any CustomerStore] = (0..<max(1, min(64, options.shards))).map { _ in
            PostgresCustomerStore(conninfo: conninfo, health: health)
        }
        try self.init(stores: stores, rules: CartRules(limits: options.limits), lifetimes: options.lifetimes,
                      catalog: catalog, orders: orders, products: products,
                      logger: logger, loginThrottle: options.loginThrottle, sessionLimits: options.sessions,
                      sessionSecret: try PostgresCustomerStore.sessionSecret(conninfo: conninfo, bytes: SessionTokens.secretBytes),
                      health: health, yearMonth: yearMonth, unixTime: unixTime)
    }

    /// Forgets the shards' state and rebuilds it from their stores, as a
    /// restart would. Only while the shards' threads are not started.
    public func reload() throws(StorageError) {
        for s in shards { _ = try s.reload() }
    }

    /// Answers `request` on the calling thread, as its shard would in a
    /// batch of one (durable before it returns). For tests and the fuzz
    /// harness: only while the shards' threads are not started.
    public func answerNow(_ request: Request, caller: Caller = Caller(uid: nil)) -> CommerceOutcome {
        let job = CommerceJob(request: request, caller: caller, receivedAt: monotonicNanoseconds()) { _ in }
        if AccountService.handles(request.method) { return accounts.outcome(for: job) }
        if case .openSession = request.method { return opener.open(caller) }
        var keys = SessionKeyMemo()
        let (shard, key) = route(job.request.method, &keys)
        return shard.process([ShardJob(job: job, key: key)])[0]
    }

    private static func shardCount(_ options: Options, _ logger: Logger) throws(StorageError) -> Int {
        do { try Files.makeDirectories(options.directory, mode: 0o700) } catch {
            throw StorageError("cannot create \(options.directory): \(error)")
        }
        let path = options.directory + "/" + layoutFile
        let stored: [UInt8]?
        do { stored = try Files.read(path) } catch { throw StorageError("cannot read \(path): \(error)") }
        if let stored {
            let text = String(decoding: stored, as: UTF8.self).trimmingCharacters
            guard let n = Int(text), (1...64).contains(n) else {
                throw StorageError("\(path) should hold the number of customer shards (1 to 64), not \"\(clip(text))\"")
            }
            if n != options.shards {
                logger.info("keeping the \(n) customer shard(s) of \(options.directory) (sessions are placed by that number); --customer-shards \(options.shards) applies to a new data directory")
            }
            return n
        }
        let n = max(1, min(64, options.shards))
        do { try Files.writeAtomically(path, Array("\(n)\n".utf8)) } catch {
            throw StorageError("cannot write \(path): \(error)")
        }
        return n
    }

    public func start() throws(Errno) {
        var started: [OSThread] = []
        for s in shards { started.append(try OSThread(name: "groserd-cart\(s.index)") { s.run() }) }
        try accounts.start()
        started.append(try OSThread(name: "groserd-compact") { [compactions, shards] in
            OSThread.runInBackground()
            while true {
                let asked = compactions.take(upTo: 64)
                if asked.isEmpty { return }
                for i in Set(asked).sorted() { shards[i].checkpoint() }
            }
        })
        threads.withLock { $0 = started }
    }

    /// Sends a request to its session's shard (OpenSession is answered
    /// at once). False when the shards are stopping.
    /// `sessionKeys` is the sending connection's: its last token's key.
    func submit(_ job: consuming CommerceJob, sessionKeys: inout SessionKeyMemo) -> Bool {
        if case .openSession = job.request.method {
            opener.answer(job)
            return true
        }
        // The job is moved into the ShardJob (a router that took the job
        // and returned it in a tuple copied it, its strings retained).
        let (shard, key) = route(job.request.method, &sessionKeys)
        return shard.submit(ShardJob(job: job, key: key))
    }

    /// The shard of the session a request names (none: the first), and the session's key.
    private func route(_ method: RequestMethod, _ keys: inout SessionKeyMemo) -> (CustomerShard, SessionKey?) {
        let token = method.sessionToken ?? ""
        guard !token.isEmpty else { return (shards[0], nil) }
        let key = keys.key(for: token)
        return (shards[key.shard(of: shards.count)], key)
    }

    /// Stops the shards once their batches in progress are durable and
    /// answered; requests still queued are dropped unanswered (and unapplied).
    public func stop() {
        // Logins first: their steps need the shards.
        accounts.stop()
        for s in shards { s.stopDropping(); s.close() }
        compactions.close()
        for t in threads.withLock({ t in defer { t.removeAll() }; return t }) { t.join() }
    }
}
