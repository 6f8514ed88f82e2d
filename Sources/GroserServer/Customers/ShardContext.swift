import GroserStorage
import GroserSystem
import GroserWire

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

/// Batches made durable: how many, and their latency (Stats' fsync line):
/// customer-log appends, or with PostgreSQL each batch's transaction.
final class DurabilityStats: Sendable {
    private let appends = Locked(LatencyHistogram())
    func record(nanoseconds: UInt64) { appends.withLock { $0.record(nanoseconds) } }
    var histogram: LatencyHistogram { appends.withLock { $0 } }
}
