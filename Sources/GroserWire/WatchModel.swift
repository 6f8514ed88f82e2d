/// One product's state after a change, as a watch frame names it.
public struct ProductChange: Sendable, Hashable {
    public var uid: String
    public var shelfUID: String
    public var price: Money
    public var outOfStock: Bool
    public init(uid: String, shelfUID: String, price: Money, outOfStock: Bool) {
        self.uid = uid
        self.shelfUID = shelfUID
        self.price = price
        self.outOfStock = outOfStock
    }
}

/// One frame of a watch (PROTOCOL.md §7B).
public struct WatchEvent: Sendable, Hashable {
    public var storeUID: String
    /// The store's version after the changes this frame names.
    public var storeVersion: UInt64
    /// The version this frame follows: the watch's since_version for the
    /// first frame, then the store version of the frame before.
    public var previousVersion: UInt64
    /// The changes cannot be named: reload the store.
    public var reload: Bool
    public var shelfUIDs: [String]
    public var products: [ProductChange]
    public var catalogVersion: UInt64
    /// The first frame of the watch.
    public var initial: Bool

    public init(storeUID: String, storeVersion: UInt64, previousVersion: UInt64, reload: Bool = false,
                shelfUIDs: [String] = [], products: [ProductChange] = [], catalogVersion: UInt64 = 0,
                initial: Bool = false) {
        self.storeUID = storeUID
        self.storeVersion = storeVersion
        self.previousVersion = previousVersion
        self.reload = reload
        self.shelfUIDs = shelfUIDs
        self.products = products
        self.catalogVersion = catalogVersion
        self.initial = initial
    }
}

/// A latency distribution as Stats reports it, in microseconds.
public struct LatencySummary: Sendable, Hashable {
    public var count: UInt64 = 0
    public var p50: UInt64 = 0
    public var p90: UInt64 = 0
    public var p99: UInt64 = 0
    public var p999: UInt64 = 0
    public var max: UInt64 = 0
    public var sum: UInt64 = 0
    public init(count: UInt64 = 0, p50: UInt64 = 0, p90: UInt64 = 0, p99: UInt64 = 0, p999: UInt64 = 0,
                max: UInt64 = 0, sum: UInt64 = 0) {
        self.count = count
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p999 = p999
        self.max = max
        self.sum = sum
    }
}

/// One method's line in Stats.
public struct MethodStats: Sendable, Hashable {
    public var method: String
    public var requests: UInt64
    public var errors: UInt64
    public var latency: LatencySummary
    public init(method: String, requests: UInt64, errors: UInt64, latency: LatencySummary) {
        self.method = method
        self.requests = requests
        self.errors = errors
        self.latency = latency
    }
}

/// Stats' answer (PROTOCOL.md §7C).
public struct ServerStats: Sendable, Hashable {
    public var serverVersion = ""
    public var uptimeMilliseconds: UInt64 = 0
    public var connections: UInt64 = 0
    public var connectionsAccepted: UInt64 = 0
    public var connectionsRefused: UInt64 = 0
    public var watchers: UInt64 = 0
    public var watchFrames: UInt64 = 0
    public var watchCoalesced: UInt64 = 0
    public var watchersCutOff: UInt64 = 0
    public var methods: [MethodStats] = []
    /// Answers by status code other than OK, by code.
    public var errors: [StatusCount] = []
    public var catalogVersion: UInt64 = 0
    public var catalogStores: UInt64 = 0
    public var catalogProducts: UInt64 = 0
    /// Customer-shard batches made durable.
    public var commitBatches: UInt64 = 0
    /// Each batch's customer-log append (write and fdatasync); with
    /// PostgreSQL, each batch's transaction from its BEGIN to its COMMIT.
    public var fsync = LatencySummary()
    public var residentBytes: UInt64 = 0
    /// What the stores' search indexes hold (part of `residentBytes`).
    public var searchIndexBytes: UInt64 = 0
    public var slowReadersCutOff: UInt64 = 0
    /// The store groserd keeps its data in: "sqlite" or "postgresql".
    public var store = ""
    /// "ok", or "unavailable since <RFC 3339 time>: <reason>" (PROTOCOL.md §7C).
    public var storeState = ""
    /// PostgreSQL only: pipelined round trips that do not wait for a commit (PROTOCOL.md §7C).
    public var storeRoundTrip = LatencySummary()
    /// Shard batches run again because another groserd changed one of their sessions first.
    public var storeConflicts: UInt64 = 0
    /// Connections to the store made again after one was lost or could not be made.
    public var storeReconnects: UInt64 = 0
    /// Of `connectionsRefused`: the peer's uid held its maximum.
    public var connectionsRefusedPerUID: UInt64 = 0
    /// Of `connectionsRefused`: only the slots kept for operators were left.
    public var connectionsRefusedReserved: UInt64 = 0
    /// Connections closed after the idle timeout.
    public var connectionsClosedIdle: UInt64 = 0

    public init() {}
}

/// How many answers had one status code.
public struct StatusCount: Sendable, Hashable {
    public var code: StatusCode
    public var count: UInt64
    public init(code: StatusCode, count: UInt64) {
        self.code = code
        self.count = count
    }
}
