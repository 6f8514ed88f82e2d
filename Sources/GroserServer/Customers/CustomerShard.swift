import GroserStorage
import GroserSystem
import GroserWire

/// How long customer state is kept, and the clock.
public struct CustomerLifetimes: Sendable {
    /// Seconds an idempotency key's answer is remembered (default 24 h).
    public var answers: Int64 = 24 * 3600
    /// Seconds a session may stay unused before it is removed with its carts (default 30 days).
    public var idleSessions: Int64 = 30 * 24 * 3600
    public init(answers: Int64 = 24 * 3600, idleSessions: Int64 = 30 * 24 * 3600) {
        self.answers = answers
        self.idleSessions = idleSessions
    }
    /// How often a shard looks for what expired.
    var sweepSeconds: Int64 { max(1, min(60, min(answers, idleSessions) / 4)) }
}

/// What every shard shares: the rules, the catalog, and the database that
/// takes checkouts (stock and orders live with the catalog).
struct ShardContext: Sendable {
    var rules: CartRules
    var catalog: CatalogService
    /// Checkout's stock and orders, and ListOrders.
    var orders: any CommerceStore
    var products: @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?
    var lifetimes: CustomerLifetimes
    var yearMonth: @Sendable () -> (year: Int, month: Int)
    var unixTime: @Sendable () -> Int64
    var logger: Logger
    /// Batches made durable and how long each took: the log's append
    /// (write and fdatasync), or a shared store's transaction (begin to commit).
    var durability = DurabilityStats()
    /// The store's health for Stats: here, the batches run again after a conflict.
    var health = StoreHealth(.sqlite)
    /// Tokens good before their session is stored, and each shard's share of `--max-sessions`.
    var tokens = SessionTokens.random(lifetime: 6 * 3600)
    var maximumStoredPerShard = Int.max
    /// Each uid's share of the stored sessions (nil: no share is kept).
    var storedShare: StoredSessionShare?
}

/// Batches made durable: how many, and their latency (Stats' fsync line):
/// customer-log appends, or with PostgreSQL each batch's transaction.
final class DurabilityStats: Sendable {
    private let appends = Locked(LatencyHistogram())
    func record(nanoseconds: UInt64) { appends.withLock { $0.record(nanoseconds) } }
    var histogram: LatencyHistogram { appends.withLock { $0 } }
}

/// A request on its way to a shard, with its session's key.
struct ShardJob: Sendable {
    var job: CommerceJob
    var key: SessionKey?
    /// A step of Register or Login (the job's request is the Login or
    /// Register it serves; its answer goes to `step.done`, not the reply).
    var step: AccountStepCall? = nil
}

extension ShardJob {
    /// The sessions the request reads or changes (a shared store reads them
    /// afresh for each batch; the owners of logged-in sessions come along).
    func appendKeys(to keys: inout [SessionKey]) {
        if let key { keys.append(key) }
        guard let step else { return }
        switch step.step {
        case .register(let owner, _), .credentials(let owner): keys.append(owner)
        case .seal(let guest, let owner): keys.append(guest); keys.append(owner)
        case .merge(let owner, let guest, _, _, _, _): keys.append(owner); if let guest { keys.append(guest) }
        case .removeSealed(let guest): keys.append(guest)
        }
    }

    /// The remembered answers the request may replay: its session's answer
    /// under its idempotency key (a login's, under the account's entry).
    func appendAnswerNames(to names: inout [(SessionKey, String)]) {
        if let step {
            if case .merge(let owner, _, _, let idempotencyKey, _, _) = step.step, !idempotencyKey.isEmpty {
                names.append((owner, "login:" + idempotencyKey))
            }
            return
        }
        guard let key else { return }
        let name: String
        switch job.request.method {
        case .addItem(let m, _, _), .setQuantity(let m, _, _), .removeItem(let m, _), .clearCart(let m): name = m.idempotencyKey
        case .checkout(let d): name = d.idempotencyKey
        default: return
        }
        if !name.isEmpty { names.append((key, name)) }
    }
}

/// One shard of customer state: the sessions whose key hashes to it, in
/// memory, owned by the shard's one thread (no lock on the hot path). It
/// takes every waiting request as a batch, applies the rules to its state
/// (only the batch's later requests see the changes: nobody else reads the
/// state), writes the batch's records with one fdatasync, and only then
/// sends the answers. When the write fails (a full disk) the batch's
/// changes are undone and every request of the batch is answered
/// UNAVAILABLE: nothing it changed was acknowledged.
final class CustomerShard: @unchecked Sendable {
    // @unchecked: `state`, `cache` and `lastSweep` belong to the shard's
    // thread; `queue` and `changes` are the only ways in.
    let index: Int
    let count: Int
    let store: any CustomerStore
    /// `store`, when several groserd share it (PostgreSQL).
    let shared: (any SharedCustomerStore)?
    let context: ShardContext
    private let queue = BlockingQueue<ShardJob>()
    // Not checked for exclusivity at run time (each access cost about 80
    // instructions, several per request): only the shard's thread touches them.
    @exclusivity(unchecked) private var state = CustomerState()
    @exclusivity(unchecked) private var cache: ProductCache
    private let changes = Locked<[CatalogChange]>([])
    private var lastSweep: Int64 = 0
    /// Tells the compactor this shard has sealed log to fold.
    var checkpointRequested: (@Sendable (CustomerShard) -> Void)?
    static let batchLimit = 1024

    init(index: Int, count: Int, store: any CustomerStore, context: ShardContext) {
        self.index = index
        self.count = count
        self.store = store
        shared = store as? any SharedCustomerStore
        self.context = context
        cache = ProductCache(source: context.products)
    }

    /// Rebuilds the shard's state (before its thread starts).
    func load() throws(StorageError) -> String {
        let line = try store.load(into: &state)
        lastSweep = context.unixTime()
        sweep(now: lastSweep)
        return line
    }

    /// Drops the state and loads it again (a restart, in tests).
    func reload() throws(StorageError) -> String {
        state = CustomerState()
        cache.removeAll()
        return try load()
    }

    /// Records an older groserd kept in the database: made durable here first.
    func adopt(_ records: [CustomerRecord]) throws(StorageError) {
        guard !records.isEmpty else { return }
        try store.append(records)
        for r in records { state.apply(r) }
    }

    var sessionCount: Int { state.sessions.count }

    /// Guest sessions sealed for a merge that a crash or a failure left
    /// unfinished: (guest, account entry, carts). Before the thread starts.
    func sealedGuests() -> [(guest: SessionKey, owner: SessionKey, carts: [String: StoredCart])] {
        state.sessions.compactMap { key, s in s.sealedInto.map { (key, $0, s.carts) } }
    }

    func submit(_ job: consuming ShardJob) -> Bool { queue.put(job) }

    func catalogChanged(_ change: CatalogChange) { changes.withLock { $0.append(change) } }

    func close() { queue.close() }

    private let stopFlag = Locked(false)
    func stopDropping() { stopFlag.withLock { $0 = true } }

    /// How long a shard waits for the clients it just answered to send
    /// again before it starts the next batch (PostgreSQL's commit_delay):
    /// without it, the requests that arrived during one fdatasync went
    /// alone into the next, and at c=50 P=1 every client waited for two
    /// fdatasyncs per request (batches alternating between about 4 and 21).
    static let gatherNanoseconds: UInt64 = 150_000

    func run() {
        var answered = 0
        while true {
            if answered > 1 { queue.wait(forAtLeast: answered, timeoutNanoseconds: Self.gatherNanoseconds) }
            let jobs = queue.take(upTo: Self.batchLimit, timeoutNanoseconds: 1_000_000_000)
            answered = jobs.count
            if jobs.isEmpty {
                if queue.isClosed { return }
                sweepIfDue()
                continue
            }
            if stopFlag.withLock({ $0 }) {
                context.logger.info("dropped \(jobs.count) unanswered cart request(s) at shutdown")
                continue
            }
            // Filtered only when needed: the filter copies every job.
            // By index: `contains(where:)` handed its closure a copy of each job.
            let closed = jobs.withUnsafeBufferPointer { b in b.indices.contains { b[$0].job.connection?.isClosed == true } }
            if closed {
                let wanted = jobs.filter { $0.job.connection?.isClosed != true }
                if !wanted.isEmpty { process(wanted, bodiesWanted: false) }
            } else {
                process(jobs, bodiesWanted: false)
            }
            // Its jobs are destroyed now, on this thread; its room is used again.
            queue.recycle(consume jobs)
            sweepIfDue()
        }
    }

    // MARK: Batches

    /// What a batch changed in `state`, each change with what it replaced,
    /// to be undone (last first) when the batch cannot be made durable.
    /// Changing the state in place, rather than in an overlay of whole
    /// sessions copied out of it, spares a copy of a session and of its
    /// carts dictionary (copied on write) per request.
    struct Batch {
        var undo: [Undo] = []
        var records: [CustomerRecord] = []
        var soldOut = false
        /// What the request being run answers besides its outcome.
        var side: SideAnswer?
    }

    /// A request's answer beyond its `CommerceOutcome`: an account step's
    /// answer, or a cart mutation's whole response frame, written in one
    /// allocation with its body (its outcome then carries no body). Kept
    /// beside the outcomes, so a batch that fails drops them with them.
    enum SideAnswer {
        case step(AccountStepAnswer)
        case frame([UInt8])
    }

    /// What a change replaced.
    enum Undo {
        /// A whole session (nil: there was none).
        case session(SessionKey, SessionState?)
        /// One cart of a session, and the session's last activity.
        case cart(SessionKey, storeUID: String, StoredCart?, lastActiveUnix: Int64)
        /// One remembered answer of a session.
        case answer(SessionKey, name: String, StoredAnswer?)
    }

    /// Sets a whole session (nil removes it), undoably.
    func put(_ session: SessionState?, for key: SessionKey, _ batch: inout Batch) {
        let old = if let session { state.sessions.updateValue(session, forKey: key) } else { state.sessions.removeValue(forKey: key) }
        batch.undo.append(.session(key, old))
    }

    /// Puts back what the batch changed.
    func undo(_ batch: Batch) {
        for change in batch.undo.reversed() {
            switch change {
            case .session(let key, let old):
                state.sessions[key] = old
            case .cart(let key, let storeUID, let old, let lastActive):
                state.sessions[key]?.carts[storeUID] = old
                state.sessions[key]?.lastActiveUnix = lastActive
            case .answer(let key, let name, let old):
                state.sessions[key]?.answers[name] = old
            }
        }
    }

    @discardableResult
    func process(_ jobs: [ShardJob], bodiesWanted: Bool = true) -> [CommerceOutcome] {
        // (Read by `mutate`; see `bodiesWanted`.)
        self.bodiesWanted = bodiesWanted
        // Through the buffer: `jobs[i]` of an Array copied the whole job
        // (and destroyed it) at each use; a buffer's element is borrowed.
        return jobs.withUnsafeBufferPointer { process($0) }
    }

    private func process(_ jobs: UnsafeBufferPointer<ShardJob>) -> [CommerceOutcome] {
        let started = monotonicNanoseconds()
        for change in changes.withLock({ c in defer { c.removeAll() }; return c }) { cache.apply(change) }
        let catalog = context.catalog.current
        let now = context.unixTime()
        var batch = Batch()
        // A cart change makes a record and an undo entry (more with an
        // idempotency key): room for one each up front spares the growth.
        batch.records.reserveCapacity(jobs.count)
        batch.undo.reserveCapacity(jobs.count)
        var outcomes: [CommerceOutcome] = []
        outcomes.reserveCapacity(jobs.count)
        var sides: [SideAnswer?] = []
        if let shared {
            runShared(jobs, shared, catalog, now, &batch, &outcomes, &sides)
        } else {
            runLogged(jobs, catalog, now, &batch, &outcomes, &sides)
        }
        lookupTx = nil
        // Every request's session was used, answered or refused; a run of
        // one session's requests (a pipelining client) sets it once.
        var last: SessionKey?
        for i in jobs.indices {
            guard let key = jobs[i].key, key != last else { continue }
            last = key
            // In place (the dictionary's optional-chained setter cost about
            // 1,700 instructions per session under callgrind).
            withSession(key) { $0.lastActiveUnix = now }
        }
        if batch.soldOut {
            // Watchers hear of the sold-out product after the answers are queued.
            do { try context.catalog.refresh(announce: false) } catch { context.logger.error("cannot update the catalog after a checkout: \(error)") }
        }
        for i in jobs.indices {
            let outcome = outcomes[i]
            if let call = jobs[i].step {
                switch outcome {
                case .ok:
                    guard case .step(let answer)? = sides[i] else {
                        call.done(.failed(Status(.internal, "An account step gave no answer.")))
                        continue
                    }
                    call.done(.answer(answer))
                case .failed(let status): call.done(.failed(status))
                }
                continue
            }
            if case .ok = outcome, case .frame(let frame)? = sides[i] {
                jobs[i].job.reply(frame)
                continue
            }
            let id = jobs[i].job.request.id
            switch outcome {
            case .ok(let field, let body): jobs[i].job.reply(ResponseFrameWriter.okFrame(id: id, field: field, body: body))
            case .failed(let status):
                var frame: [UInt8] = []
                ResponseFrameWriter.appendStatus(id: id, status: status, to: &frame)
                jobs[i].job.reply(frame)
            }
        }
        if batch.soldOut { context.catalog.announce() }
        if !batch.records.isEmpty {
            do {
                if try store.checkpointDue() { checkpointRequested?(self) }
            } catch {
                context.logger.error("cannot start a new customer log segment: \(error)")
            }
        }
        context.logger.debug("shard \(index): \(jobs.count) request(s), \(batch.records.count) record(s) in \((monotonicNanoseconds() - started) / 1000) µs")
        return outcomes
    }

    /// A batch against the customer log: the rules on the state in memory
    /// (checkouts in one transaction of the catalog's database), then the
    /// records appended with one fdatasync.
    private func runLogged(_ jobs: UnsafeBufferPointer<ShardJob>, _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch,
                           _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        let needsDatabase = Self.needsDatabase(jobs)
        do {
            if needsDatabase {
                try context.orders.write { (tx) throws(StorageError) in
                    for i in jobs.indices {
                        outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, tx))
                        sides.append(batch.side.take())
                    }
                }
            } else {
                for i in jobs.indices {
                    outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, nil))
                    sides.append(batch.side.take())
                }
            }
            if !batch.records.isEmpty {
                let started = monotonicNanoseconds()
                try store.append(batch.records)
                context.durability.record(nanoseconds: monotonicNanoseconds() &- started)
            }
        } catch {
            failAll(jobs, error, &batch, &outcomes, &sides)
        }
    }

    /// Whether a batch reads products through the database's transaction
    /// (locked): only with a checkout or ListOrders, which write or read
    /// orders there; cart mutations otherwise see the shard's cache.
    private static func needsDatabase(_ jobs: UnsafeBufferPointer<ShardJob>) -> Bool {
        // By index: `contains(where:)` handed the closure a copy of each job.
        for i in jobs.indices {
            switch jobs[i].job.request.method { case .checkout, .listOrders: return true; default: continue }
        }
        return false
    }

    /// Times a batch is run again after another host changed one of its
    /// sessions first.
    static let sharedAttempts = 5

    /// A batch against a store several groserd share: one transaction that
    /// reads the batch's sessions afresh (locked), applies the rules, writes
    /// the records and commits; run again when another host won a race.
    private func runShared(_ jobs: UnsafeBufferPointer<ShardJob>, _ shared: any SharedCustomerStore, _ catalog: EncodedCatalog,
                           _ now: Int64, _ batch: inout Batch,
                           _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        var keys: [SessionKey] = []
        var answers: [(SessionKey, String)] = []
        for i in jobs.indices {
            jobs[i].appendKeys(to: &keys)
            jobs[i].appendAnswerNames(to: &answers)
        }
        let needsDatabase = Self.needsDatabase(jobs)
        let answerCutoff = now - context.lifetimes.answers
        for attempt in 1...Self.sharedAttempts {
            do {
                let started = monotonicNanoseconds()
                let fresh = try shared.begin(reading: keys, answers: answers, answerCutoff: answerCutoff)
                for (key, session) in fresh { state.sessions[key] = session }
                // As runLogged: products are read through the transaction
                // (locked, FOR UPDATE) only in a batch with a checkout or
                // ListOrders; cart mutations otherwise see the shard's cache.
                // Locking every cart-add's product serialized all batches
                // naming one product, on every host, behind each commit.
                let tx: (any CommerceTransaction)? = needsDatabase ? shared.transaction : nil
                for i in jobs.indices {
                    outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, tx))
                    sides.append(batch.side.take())
                }
                try shared.commit(batch.records, state: state, answerCutoff: answerCutoff)
                context.durability.record(nanoseconds: monotonicNanoseconds() &- started)
                return
            } catch where error.isConflict && attempt < Self.sharedAttempts {
                context.health.conflict()
                context.logger.debug("shard \(index): another groserd changed a session of this batch first; running it again (\(attempt))")
                shared.rollback()
                undo(batch)
                batch = Batch()
                outcomes.removeAll(keepingCapacity: true)
                sides.removeAll(keepingCapacity: true)
            } catch {
                shared.rollback()
                failAll(jobs, error, &batch, &outcomes, &sides)
                return
            }
        }
    }

    /// Answers every request of a batch that could not be made durable
    /// UNAVAILABLE, and undoes what it changed in memory.
    private func failAll(_ jobs: UnsafeBufferPointer<ShardJob>, _ error: any Error, _ batch: inout Batch,
                         _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        context.logger.error("a batch of \(jobs.count) cart request(s) could not be made durable: \(error)")
        let failed = CommerceOutcome.failed(Status(.unavailable, "The change could not be saved (\(error)); nothing was changed. Try again later."))
        outcomes = jobs.map { _ in failed }
        sides = jobs.map { _ in nil }
        undo(batch)
        batch = Batch()
    }

    /// Answers one request of the batch. The job is read in place through
    /// its pointer: passed as a value (even `borrowing`, out of the buffer)
    /// it was copied whole, about 480 instructions a request.
    func handle(_ j: UnsafePointer<ShardJob>, _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch,
                        _ tx: (any CommerceTransaction)?) -> CommerceOutcome {
        if let call = j.pointee.step {
            // Steps never expire: a login that sealed a guest finishes its merge.
            do {
                batch.side = .step(try runStep(call.step, now, &batch))
                return .ok(.login, [])
            } catch {
                return .failed(error.status)
            }
        }
        if let refusal = Dispatcher.deadlineRefusal(j.pointee.job.request, receivedAt: j.pointee.job.receivedAt, wording: .brief) {
            return .failed(refusal)
        }
        lookupFailure = nil
        do {
            // A request changes the state only once nothing can refuse it.
            return try run(j.pointee.job.request.method, id: j.pointee.job.request.id, key: j.pointee.key, catalog, now, &batch, tx)
        } catch let refusal as Refusal {
            if let failure = lookupFailure { return .failed(Status(.unavailable, "The store failed: \(failure.description).")) }
            // A token from OpenSession whose session nothing stored yet.
            if refusal == Self.unknownSession, let key = j.pointee.key { return unstored(j, key, catalog, now, &batch, tx) }
            return .failed(refusal.status)
        } catch let error as StorageError {
            return .failed(Status(.unavailable, "The store failed: \(error.description)."))
        } catch {
            return .failed(Status(.internal, "Unexpected error: \(error)."))
        }
    }

    /// The products a rule sees: the cache, filled from the catalog's
    /// store; inside a checkout batch's transaction, misses are read through
    /// it (the connection is the transaction's). A failed read is kept in
    /// `lookupFailure` and turns the request's answer into UNAVAILABLE.
    /// Each call starts a request's lookups afresh; the closure is made
    /// once per shard, so a request allocates nothing for it (a closure
    /// and its memo per request were two allocations).
    private func lookup(_ tx: (any CommerceTransaction)?) -> CartRules.Lookup {
        lookupTx = tx
        lastKnown = false
        lastProduct = nil
        return productLookup
    }

    /// `lookup`'s closure: the shard's thread only, one request at a time.
    private lazy var productLookup: CartRules.Lookup = { [unowned(unsafe) self] uid in product(uid) }
    @exclusivity(unchecked) private var lookupTx: (any CommerceTransaction)?
    @exclusivity(unchecked) private var lookupFailure: StorageError?
    // A request asks for its product twice (the rule, then the cart shown):
    // the first answer is kept and compared in place (binding an optional
    // tuple copied and destroyed its strings at every call).
    @exclusivity(unchecked) private var lastKnown = false
    @exclusivity(unchecked) private var lastUID = ""
    @exclusivity(unchecked) private var lastProduct: ProductRecord?

    private func product(_ uid: String) -> ProductRecord? {
        if lastKnown, lastUID == uid { return lastProduct }
        do {
            let product: ProductRecord?
            if let tx = lookupTx {
                if let known = cache.known(uid) { product = known } else { product = try tx.product(uid) }
            } else {
                product = try cache.product(uid)
            }
            // Only a request's first product is remembered (the rule's,
            // asked again when the cart is shown): remembering each line's
            // too cost about 300 instructions a line.
            if !lastKnown {
                lastKnown = true
                lastUID = uid
                lastProduct = product
            }
            return product
        } catch {
            lookupFailure = error
        }
        return nil
    }

    /// Called before a request changes anything: a failed product read
    /// refuses it rather than passing for a missing product.
    private func checkLookups() throws(StorageError) {
        if let failure = lookupFailure { throw failure }
    }

    private func run(_ method: RequestMethod, id: UInt64, key: SessionKey?, _ catalog: EncodedCatalog, _ now: Int64,
                     _ batch: inout Batch, _ tx: (any CommerceTransaction)?) throws -> CommerceOutcome {
        if let refusal = FieldLimits.violation(in: method) { throw refusal }
        let rules = context.rules
        switch method {
        case .getCart(_, let storeUID, let acceptPrices):
            let (_, _, key, session) = try cartHolder(key)
            try checkStore(storeUID, catalog)
            guard let cart = session.carts[storeUID] else { return .ok(.getCart, BodyEncoder.cart(rules.emptyCart(storeUID))) }
            let look = lookup(tx)
            let shown = try rules.view(cart, storeUID: storeUID, look)
            try checkLookups()
            // Lines of products the catalog no longer sells (a replacing
            // import) go, and the cart moves to a new version: the catalog
            // changed the cart, not this read.
            if shown.lines.count < cart.lines.count {
                var next = (acceptPrices ? rules.acknowledgingPrices(cart, shown: shown) : nil) ?? cart
                CartRules.keepShown(&next.lines, shown.lines)
                next.version = cart.version + 1
                save(next, key: key, storeUID: storeUID, now, &batch)
                var s = shown
                s.version = next.version
                return .ok(.getCart, BodyEncoder.cart(s))
            }
            // Seeing a changed price is not accepting it: only a GetCart
            // that asks (accept_prices) makes the shown prices the seen ones.
            if acceptPrices, let acknowledged = rules.acknowledgingPrices(cart, shown: shown) {
                save(acknowledged, key: key, storeUID: storeUID, now, &batch)
                var s = shown
                s.version = acknowledged.version
                return .ok(.getCart, BodyEncoder.cart(s))
            }
            return .ok(.getCart, BodyEncoder.cart(shown))

        case .addItem(let m, let product, let quantity):
            return try mutate(.addItem, id, m, fingerprint: "add|\(product)|\(quantity)", key, catalog, now, &batch, tx) { cart, look throws(Refusal) in
                try rules.add(cart, product: product, quantity: quantity, storeUID: m.storeUID, look)
            }
        case .setQuantity(let m, let product, let quantity):
            return try mutate(.setQuantity, id, m, fingerprint: "set|\(product)|\(quantity)", key, catalog, now, &batch, tx) { cart, look throws(Refusal) in
                try rules.setQuantity(cart, product: product, quantity: quantity, storeUID: m.storeUID, look)
            }
        case .removeItem(let m, let product):
            return try mutate(.removeItem, id, m, fingerprint: "remove|\(product)", key, catalog, now, &batch, tx) { cart, _ throws(Refusal) in
                try rules.remove(cart, product: product)
            }
        case .clearCart(let m):
            return try mutate(.clearCart, id, m, fingerprint: "clear", key, catalog, now, &batch, tx) { cart, _ in rules.clear(cart) }

        case .checkout(let d):
            guard let tx else { throw Refusal(.internal, "Checkout reached a shard without the order store.") }
            return try checkout(d, key, catalog, now, &batch, tx)

        case .listOrders:
            let (_, holderKey) = try cartHolderKeys(key)
            guard let tx else { throw Refusal(.internal, "ListOrders reached a shard without the order store.") }
            return .ok(.listOrders, BodyEncoder.listOrders(try tx.orders(session: holderKey)))

        case .logout:
            let (key, owner) = try checkSessionKey(key)
            guard owner != nil else {
                throw Refusal(.failedPrecondition, "The session is anonymous: there is no login to end (its carts stay).")
            }
            put(nil, for: key, &batch)
            batch.records.append(.sessionRemoved(key))
            return .ok(.logout, BodyEncoder.logout())

        case .whoAmI:
            let (_, session, _, holder) = try cartHolder(key)
            return .ok(.whoAmI, BodyEncoder.whoAmI(Identity(account: holder.account.map(Account.init),
                                                            sessionCreatedAtUnix: session.createdAtUnix)))

        default:
            throw Refusal(.unimplemented, "The cart service does not answer this method.")
        }
    }

    /// The shared path of every cart mutation: session and store checks,
    /// idempotency, the version check, the change, the new version, the answer.
    private func mutate(_ field: MethodField, _ id: UInt64, _ m: CartMutation, fingerprint: @autoclosure () -> String, _ key: SessionKey?,
                        _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch, _ tx: (any CommerceTransaction)?,
                        change: (StoredCart, CartRules.Lookup) throws(Refusal) -> StoredCart) throws -> CommerceOutcome {
        // Keys only: a copy of the session or of its holder, alive while
        // the state changes below, made the carts dictionary copy on write.
        // The holder's place in the sessions and its cart's place in its
        // carts are found once, and the change is saved there (each lookup
        // hashed the key or the store's uid again): nothing is added to or
        // removed from either before `save`.
        let (key, holderKey, holder) = try cartHolderIndex(key)
        try checkStore(m.storeUID, catalog)
        // Only a request with an idempotency key needs its fingerprint (the
        // string building showed in the profile of keyless adds).
        let print = m.idempotencyKey.isEmpty ? "" : "\(field.methodName)|\(m.storeUID)|\(m.expectedVersion)|\(fingerprint())"
        if let replay = try replay(key, m.idempotencyKey, print, now) { return replay }
        let (place, found) = withSession(at: holder) { s in
            let c = s.carts.index(forKey: m.storeUID)
            return (c, c.map { s.carts.values[$0] })
        }
        let cart = found ?? StoredCart()
        try context.rules.checkVersion(cart, expected: m.expectedVersion)
        let look = lookup(tx)
        var next = try change(cart, look)
        next.version = cart.version + 1
        // Encoded from the stored lines and their products: no `Cart` built.
        // Lines of products the catalog no longer has are not shown, and go
        // with this change: found by `shown`'s one lookup a line (a lookup
        // of its own for each line first made two, a third of a cart-add's
        // instructions with 20 lines under callgrind).
        let shown = try context.rules.shown(next, storeUID: m.storeUID, look)
        try checkLookups()
        CartRules.keepShown(&next.lines, shown.lines)
        save(next, key: holderKey, storeUID: m.storeUID, now, &batch, at: (holder, place))
        if m.idempotencyKey.isEmpty && !bodiesWanted {
            // The whole response frame at once, the body written in place:
            // the body alone, then the frame around it, were two
            // allocations and a copy (see SideAnswer).
            batch.side = .frame(shown.frame(id: id, field: field))
            return .ok(field, [])
        }
        let body = shown.body
        remember(key: key, m.idempotencyKey, print, field, body, now, &batch)
        return .ok(field, body)
    }

    /// Stores a session's cart for `storeUID`, in place, undoably, and logs
    /// it: the one line that changed when that is all (`CartLineChange`),
    /// else the whole cart.
    private func save(_ cart: StoredCart, key: SessionKey, storeUID: String, _ now: Int64, _ batch: inout Batch,
                      at place: (session: SessionIndex, cart: Dictionary<String, StoredCart>.Index?)? = nil) {
        if let place {
            let (old, lastActive) = withSession(at: place.session) { s in
                defer { s.lastActiveUnix = now }
                guard let c = place.cart else { return (s.carts.updateValue(cart, forKey: storeUID), s.lastActiveUnix) }
                var replaced = cart
                swap(&replaced, &s.carts.values[c])
                return (Optional(replaced), s.lastActiveUnix)
            }
            batch.records.append(record(key, storeUID, old, cart, now))
            return batch.undo.append(.cart(key, storeUID: storeUID, old, lastActiveUnix: lastActive))
        }
        let replaced = withSession(key) { s in
            defer { s.lastActiveUnix = now }
            return (s.carts.updateValue(cart, forKey: storeUID), s.lastActiveUnix)
        }
        guard let (old, lastActive) = replaced else {
            // (Callers checked the session; a cart record makes one, as the log's reader does.)
            batch.records.append(record(key, storeUID, nil, cart, now))
            var s = SessionState(createdAtUnix: now)
            s.carts[storeUID] = cart
            return put(s, for: key, &batch)
        }
        batch.records.append(record(key, storeUID, old, cart, now))
        batch.undo.append(.cart(key, storeUID: storeUID, old, lastActiveUnix: lastActive))
    }

    /// The log record of a cart going from `old` to `new`. (A shared
    /// store writes whole sessions and reads records only for their keys:
    /// no line is worked out for it.)
    private func record(_ key: SessionKey, _ storeUID: String, _ old: StoredCart?, _ new: StoredCart,
                        _ now: Int64) -> CustomerRecord {
        if shared == nil, let change = CartLineChange.between(old, new) {
            return .cartLine(key, storeUID: storeUID, change, atUnix: now)
        }
        return .cart(key, storeUID: storeUID, new, atUnix: now)
    }

    /// The shard's state (tests, before its thread starts).
    var currentState: CustomerState { state }

    /// Remembers the answer of a request with an idempotency key `name`.
    private func remember(key: SessionKey, _ name: String, _ print: String, _ field: MethodField,
                          _ body: [UInt8], _ now: Int64, _ batch: inout Batch) {
        guard !name.isEmpty else { return }
        let answer = StoredAnswer(IdempotentAnswer(fingerprint: print, field: field.rawValue, body: body), atUnix: now)
        batch.records.append(.answer(key, key: name, answer))
        guard let old = withSession(key, { $0.answers.updateValue(answer, forKey: name) }) else {
            var s = SessionState(createdAtUnix: now)
            s.answers[name] = answer
            return put(s, for: key, &batch)
        }
        batch.undo.append(.answer(key, name: name, old))
    }

    // MARK: Checkout

    private func checkout(_ d: CheckoutDetails, _ key: SessionKey?, _ catalog: EncodedCatalog, _ now: Int64,
                          _ batch: inout Batch, _ tx: any CommerceTransaction) throws -> CommerceOutcome {
        let (key, holderKey) = try cartHolderKeys(key)
        try checkStore(d.storeUID, catalog)
        // A retry finds its order before anything else is checked (the
        // card may have expired since).
        let print = CartRules.checkoutFingerprint(d)
        if let replay = try replay(key, d.idempotencyKey, print, now) { return replay }
        let cart = withSession(holderKey, { $0.carts[d.storeUID] }) ?? nil
        // The order may be in the database while the log lost the cart's
        // clearing (a crash between the two): the retry finds it there.
        if !d.idempotencyKey.isEmpty, let stored = try tx.idempotentAnswer(session: key, key: d.idempotencyKey) {
            guard stored.fingerprint == print, let field = MethodField(rawValue: stored.field) else {
                throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(d.idempotencyKey))\" was already used for a different request.")
            }
            if let cart, cart.version == d.expectedVersion, !cart.lines.isEmpty {
                save(StoredCart(version: cart.version + 1, lines: []), key: holderKey, storeUID: d.storeUID, now, &batch)
            }
            remember(key: key, d.idempotencyKey, print, field, stored.body, now, &batch)
            return .ok(field, stored.body)
        }
        try tx.savepoint()
        do {
            var fresh: [String: ProductRecord?] = [:]
            var failure: StorageError?
            let lookup: CartRules.Lookup = { uid in
                if let p = fresh[uid] { return p }
                do {
                    let p = try tx.product(uid)
                    fresh[uid] = p
                    return p
                } catch let error as StorageError {
                    failure = error
                    return nil
                } catch {
                    failure = StorageError("\(error)")
                    return nil
                }
            }
            let city = try tx.storeCityCode(d.storeUID) ?? ""
            let plan: CartRules.CheckoutPlan
            do {
                plan = try context.rules.planCheckout(d, cart: cart, cityCode: city, lookup: lookup,
                                                      now: context.yearMonth(), unixTime: now)
            } catch {
                if let failure { throw failure }
                throw error
            }
            if let failure { throw failure }
            for (uid, units) in plan.take { try tx.decrementStock(productUID: uid, by: units) }
            let order = try tx.insertOrder(plan.order, session: holderKey)
            if !plan.soldOut.isEmpty {
                _ = try tx.bumpCatalogVersion(touching: plan.soldOut)
                batch.soldOut = true
            }
            let body = BodyEncoder.checkout(order)
            if !d.idempotencyKey.isEmpty {
                try tx.saveIdempotentAnswer(session: key, key: d.idempotencyKey,
                                            IdempotentAnswer(fingerprint: print, field: MethodField.checkout.rawValue, body: body))
            }
            try tx.releaseSavepoint()
            save(StoredCart(version: (cart?.version ?? 0) + 1, lines: []), key: holderKey, storeUID: d.storeUID, now, &batch)
            remember(key: key, d.idempotencyKey, print, .checkout, body, now, &batch)
            return .ok(.checkout, body)
        } catch {
            try tx.rollbackToSavepoint()
            throw error
        }
    }

    // MARK: Shared checks

    /// A new session token whose key belongs to this shard (1 in `count` does).
    func newToken() throws(Refusal) -> (token: String, key: SessionKey) {
        for _ in 0..<256 {
            let token: String
            do { token = try KernelRandom.hex(16) } catch {
                throw Refusal(.unavailable, "The kernel gave no random bytes for a session token: \(error).")
            }
            let k = SessionKey(token: token)
            if k.shard(of: count) == index { return (token, k) }
        }
        throw Refusal(.unavailable, "No session token could be made; try again.")
    }

    /// The request's session, checked: its key and, for a logged-in
    /// session, the account entry that owns it. Read in place: a copy of the
    /// session retains (and then releases) its dictionaries.
    private func checkSessionKey(_ key: SessionKey?) throws(Refusal) -> (key: SessionKey, owner: SessionKey?) {
        let (key, owner, _) = try checkSession(key)
        return (key, owner)
    }

    /// `checkSessionKey`, with where the session lies in `state.sessions`.
    private func checkSession(_ key: SessionKey?) throws(Refusal) -> (key: SessionKey, owner: SessionKey?, index: SessionIndex) {
        guard let key else { throw Refusal(.unauthenticated, "The request carries no session; open one with OpenSession.") }
        // An account's own entry is no session (no token hashes to its key).
        guard let i = state.sessions.index(forKey: key) else { throw Self.unknownSession }
        let (isAccount, sealed, owner, ended) = withSession(at: i) { ($0.account != nil, $0.sealedInto != nil, $0.owner, $0.ended) }
        guard !isAccount else { throw Self.unknownSession }
        if ended { throw Self.endedSession }
        if sealed {
            throw Refusal(.failedPrecondition, "This session is being merged into an account by a login; use the session the login answers.")
        }
        return (key, owner, i)
    }

    typealias SessionIndex = Dictionary<SessionKey, SessionState>.Index

    /// The request's session, and the entry that holds its carts and
    /// orders: the session itself, or for a logged-in session its account.
    private func cartHolderKeys(_ key: SessionKey?) throws(Refusal) -> (session: SessionKey, holder: SessionKey) {
        let (key, holder, _) = try cartHolderIndex(key)
        return (key, holder)
    }

    /// `cartHolderKeys`, with where the holder lies in `state.sessions`:
    /// valid until an entry is added to or removed from it.
    private func cartHolderIndex(_ key: SessionKey?) throws(Refusal) -> (session: SessionKey, holder: SessionKey, index: SessionIndex) {
        let (key, owner, i) = try checkSession(key)
        guard let owner else { return (key, key, i) }
        guard let o = state.sessions.index(forKey: owner), withSession(at: o, { $0.account != nil }) else {
            throw Refusal(.unauthenticated, "The session's account is gone; log in again.")
        }
        return (key, owner, o)
    }

    /// `cartHolderKeys` with copies of both entries.
    private func cartHolder(_ key: SessionKey?) throws(Refusal)
        -> (session: SessionKey, sessionState: SessionState, holder: SessionKey, holderState: SessionState) {
        let (key, holderKey) = try cartHolderKeys(key)
        guard let s = current(key), let holder = current(holderKey) else {
            throw Refusal(.unauthenticated, "The session is unknown; open one with OpenSession.")
        }
        return (key, s, holderKey, holder)
    }

    /// A session as the batch so far leaves it.
    func current(_ key: SessionKey) -> SessionState? { state.sessions[key] }

    /// `body` on the session of `key` in place, or nil when there is none:
    /// the dictionary's getter (and `values[i]`'s) copies the whole session,
    /// retaining and releasing its dictionaries.
    @inline(__always)
    private func withSession<R>(_ key: SessionKey, _ body: (inout SessionState) -> R) -> R? {
        guard let i = state.sessions.index(forKey: key) else { return nil }
        return body(&state.sessions.values[i])
    }

    /// `body` on the session at `i` in place (an index from `checkSession`
    /// or `cartHolderIndex`, taken since nothing was added or removed).
    @inline(__always)
    private func withSession<R>(at i: SessionIndex, _ body: (inout SessionState) -> R) -> R {
        body(&state.sessions.values[i])
    }

    func checkStore(_ storeUID: String, _ catalog: EncodedCatalog) throws(Refusal) {
        guard !storeUID.isEmpty else { throw Refusal(.invalidArgument, "The request names no store.") }
        // The batch's requests mostly name one store: the last store found
        // in this batch's catalog is compared, not hashed and looked up again.
        if storeUID == knownStore.uid, catalog.version == knownStore.catalogVersion { return }
        guard catalog.stores[storeUID] != nil else { throw Refusal(.notFound, "No store has the uid \"\(clip(storeUID))\".") }
        knownStore = (storeUID, catalog.version)
    }

    /// False while the shard's own thread runs a batch: the answers go out
    /// as frames, and a keyless cart mutation's outcome carries no body
    /// (its frame does). Callers that read the outcomes (tests through
    /// `CustomerService.answerNow`, the fuzz harness) want bodies.
    @exclusivity(unchecked) private var bodiesWanted = true

    /// The last store `checkStore` found, and in which catalog version.
    @exclusivity(unchecked) private var knownStore: (uid: String, catalogVersion: UInt64) = ("", .max)

    /// The remembered answer of the session's earlier request with this
    /// idempotency key, or nil.
    private func replay(_ key: SessionKey, _ name: String, _ print: String, _ now: Int64) throws(Refusal) -> CommerceOutcome? {
        guard !name.isEmpty, let stored = withSession(key, { $0.answers[name] }) ?? nil,
              now - stored.atUnix <= context.lifetimes.answers else { return nil }
        guard stored.answer.fingerprint == print, let field = MethodField(rawValue: stored.answer.field) else {
            throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(name))\" was already used for a different request.")
        }
        return .ok(field, stored.answer.body)
    }

    // MARK: Expiry

    private func sweepIfDue() {
        let now = context.unixTime()
        guard now - lastSweep >= context.lifetimes.sweepSeconds else { return }
        lastSweep = now
        sweep(now: now)
    }

    private func sweep(now: Int64) {
        if let shared {
            // Memory is a cache of the shared store: what expired is
            // forgotten here, and the store's checkpoint removes it there.
            _ = state.expire(nowUnix: now, answerLifetime: context.lifetimes.answers, idleLifetime: context.lifetimes.idleSessions)
            shared.setExpiry(idleBefore: now - context.lifetimes.idleSessions, answersBefore: now - context.lifetimes.answers)
            return
        }
        let removed = state.expire(nowUnix: now, answerLifetime: context.lifetimes.answers,
                                   idleLifetime: context.lifetimes.idleSessions)
        guard !removed.isEmpty else { return }
        do {
            try store.append(removed.map { .sessionRemoved($0) })
            context.logger.info("shard \(index): removed \(removed.count) session(s) idle for more than \(context.lifetimes.idleSessions) s")
        } catch {
            // They are gone from memory; the next start expires them again.
            context.logger.warning("shard \(index): cannot log the removal of \(removed.count) idle session(s): \(error)")
        }
    }

    /// The compactor's call: folds the sealed log into a snapshot.
    func checkpoint() {
        let lifetimes = context.lifetimes
        let now = context.unixTime()
        do {
            // Answers expire by a rule every reader applies; idle sessions
            // only by the shard's logged removals (reads keep a session
            // alive, and leave no record).
            let kept = try store.checkpoint { state in
                _ = state.expire(nowUnix: now, answerLifetime: lifetimes.answers, idleLifetime: .max)
            }
            context.logger.info("shard \(index): checkpoint written with \(kept) session(s)")
        } catch {
            context.logger.error("shard \(index): checkpoint failed (the log is kept whole and will be tried again): \(error)")
        }
    }
}
