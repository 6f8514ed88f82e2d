import GroserStorage
import GroserSystem
import GroserWire

/// One shard of customer state: the sessions whose key hashes to it, in
/// memory, owned by the shard's one thread (no lock on the hot path). It
/// takes every waiting request as a batch, applies the rules to its state
/// (only the batch's later requests see the changes: nobody else reads the
/// state), writes the batch's records with one fdatasync, and only then
/// sends the answers. When the write fails (a full disk) the batch's
/// changes are undone and every request of the batch is answered
/// UNAVAILABLE: nothing it changed was acknowledged.
///
/// This file holds the shard's state and the ways in; its work is split by
/// concern over the extensions beside it: the thread and batch loop
/// (+Runner), durability and undo (+Durability), the method switch
/// (+Dispatch), cart mutations (+Carts), product lookups (+Products),
/// checkout (+Checkout), sessions (+Sessions), idempotency (+Idempotency),
/// expiry and checkpoints (+Expiry), account steps (+Accounts) and unstored
/// sessions (+Unstored). Its state is internal only so that they can reach
/// it: nothing outside the shard's files touches it.
final class CustomerShard: @unchecked Sendable {
    // @unchecked: `state`, `cache` and `lastSweep` belong to the shard's
    // thread; `queue` and `changes` are the only ways in.
    let index: Int
    let count: Int
    let store: any CustomerStore
    /// `store`, when several groserd share it (PostgreSQL).
    let shared: (any SharedCustomerStore)?
    let context: ShardContext
    let queue = BlockingQueue<ShardJob>()
    // Not checked for exclusivity at run time (each access cost about 80
    // instructions, several per request): only the shard's thread touches them.
    @exclusivity(unchecked) var state = CustomerState()
    @exclusivity(unchecked) var cache: ProductCache
    let changes = Locked<[CatalogChange]>([])
    var lastSweep: Int64 = 0

    // A request's product lookups (+Products).
    /// `lookup`'s closure: the shard's thread only, one request at a time.
    lazy var productLookup: CartRules.Lookup = { [unowned(unsafe) self] uid in product(uid) }
    @exclusivity(unchecked) var lookupTx: (any CommerceTransaction)?
    /// Whether `lookupTx` is set (+Products).
    @exclusivity(unchecked) var readsThroughTransaction = false
    @exclusivity(unchecked) var lookupFailure: StorageError?
    // A request asks for its product twice (the rule, then the cart shown):
    // the first answer is kept and compared in place (binding an optional
    // tuple copied and destroyed its strings at every call).
    @exclusivity(unchecked) var lastKnown = false
    @exclusivity(unchecked) var lastUID = ""
    @exclusivity(unchecked) var lastSlot: ProductSlot?
    /// The encoded lines of carts answered for lately (+Carts).
    let lineMemo = LineMemo()
    /// The batch's answer frames (+Runner, +Carts).
    let frames = FrameScratch()
    /// The last batch's arrays, kept for the next (+Runner).
    @exclusivity(unchecked) var spareOutcomes: [CommerceOutcome] = []
    @exclusivity(unchecked) var spareSides: [SideAnswer?] = []
    @exclusivity(unchecked) var sparePlaces: [Range<Int>] = []
    @exclusivity(unchecked) var spareBatch = Batch()

    /// False while the shard's own thread runs a batch: the answers go out
    /// as frames, and a keyless cart mutation's outcome carries no body
    /// (its frame does). Callers that read the outcomes (tests through
    /// `CustomerService.answerNow`, the fuzz harness) want bodies.
    @exclusivity(unchecked) var bodiesWanted = true

    /// The last store `checkStore` found, and in which catalog version.
    @exclusivity(unchecked) var knownStore: (uid: String, catalogVersion: UInt64) = ("", .max)

    /// Tells the compactor this shard has sealed log to fold.
    var checkpointRequested: (@Sendable (CustomerShard) -> Void)?

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
        state.sessions.compactMap { key, s in s.sealedInto.map { (key, $0, s.carts.dictionary) } }
    }

    func submit(_ job: consuming ShardJob) -> Bool { queue.put(job) }

    func catalogChanged(_ change: CatalogChange) { changes.withLock { $0.append(change) } }

    func close() { queue.close() }

    let stopFlag = Locked(false)
    func stopDropping() { stopFlag.withLock { $0 = true } }

    /// The shard's state (tests, before its thread starts).
    var currentState: CustomerState { state }
}
