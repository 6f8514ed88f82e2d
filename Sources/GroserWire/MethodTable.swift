/// Every method of protocol v1 in one table: its name, its field in the
/// request and response oneofs, who may call it, whether a client may
/// resend it after a lost answer, and which part of groserd runs it. The
/// server routes by it, the logs and Stats name methods by it, and the
/// client, the CLI and the fuzz seeds read it instead of keeping their own
/// lists. Adding a method starts here (and in the .proto files).
public struct MethodInfo: Sendable, Hashable {
    /// Who may call the method.
    public enum Access: Sendable, Hashable {
        /// Anyone who can connect.
        case anyone
        /// Anyone who can connect and holds the session token it names.
        case session
        /// groserd's own user, root and `--admin-group` members (PROTOCOL.md §8).
        case operators
    }

    /// What resending the request after its answer was lost does.
    public enum Retry: Sendable, Hashable {
        /// Nothing a first call did not do: a read, or a change to a value
        /// given whole (SetProduct, ImportCatalog).
        case safe
        /// Applied at most once when resent with the same `idempotency_key`
        /// (a retry gets the first answer); without a key, not safe.
        case withIdempotencyKey
        /// A resend acts again or answers otherwise (OpenSession opens a
        /// second session; Register finds the account taken).
        case unsafe
    }

    /// Which part of groserd answers it.
    public enum Executor: Sendable, Hashable {
        /// The event loop that read it, from the encoded catalog.
        case catalogReader
        /// The event loop that read it, from its own state (watches, stats).
        case eventLoop
        /// The customer shard that owns the session (group-committed log).
        case customerShard
        /// A password-hashing worker, then the customer shard.
        case accountWorkers
        /// The commit queue's thread (SQLite, the catalog's change path).
        case commitQueue
        /// The import thread (whole-catalog imports and exports).
        case importThread
    }

    public let field: MethodField
    /// The method's name, as ServerInfo, Stats and the logs give it.
    public let name: String
    public let access: Access
    public let retry: Retry
    public let executor: Executor
    /// Answers with a stream of frames (`continues`), not one.
    public let streams: Bool

    init(_ field: MethodField, _ name: String, _ access: Access, _ retry: Retry, _ executor: Executor, streams: Bool = false) {
        self.field = field
        self.name = name
        self.access = access
        self.retry = retry
        self.executor = executor
        self.streams = streams
    }

    /// Answered somewhere other than the event loop that read it.
    public var isDeferred: Bool { executor != .catalogReader && executor != .eventLoop }
}

public enum MethodTable {
    /// In field order, from field 10 on.
    public static let all: [MethodInfo] = [
        MethodInfo(.serverInfo, "ServerInfo", .anyone, .safe, .catalogReader),
        MethodInfo(.listCities, "ListCities", .anyone, .safe, .catalogReader),
        MethodInfo(.getStore, "GetStore", .anyone, .safe, .catalogReader),
        MethodInfo(.getShelf, "GetShelf", .anyone, .safe, .catalogReader),
        MethodInfo(.openSession, "OpenSession", .anyone, .unsafe, .customerShard),
        MethodInfo(.getCart, "GetCart", .session, .safe, .customerShard),
        MethodInfo(.addItem, "AddItem", .session, .withIdempotencyKey, .customerShard),
        MethodInfo(.setQuantity, "SetQuantity", .session, .withIdempotencyKey, .customerShard),
        MethodInfo(.removeItem, "RemoveItem", .session, .withIdempotencyKey, .customerShard),
        MethodInfo(.clearCart, "ClearCart", .session, .withIdempotencyKey, .customerShard),
        MethodInfo(.checkout, "Checkout", .session, .withIdempotencyKey, .customerShard),
        MethodInfo(.listOrders, "ListOrders", .session, .safe, .customerShard),
        MethodInfo(.setProduct, "SetProduct", .operators, .safe, .commitQueue),
        MethodInfo(.listProducts, "ListProducts", .anyone, .safe, .catalogReader),
        MethodInfo(.importCatalog, "ImportCatalog", .operators, .safe, .importThread),
        MethodInfo(.exportCatalog, "ExportCatalog", .operators, .safe, .importThread),
        MethodInfo(.register, "Register", .anyone, .unsafe, .accountWorkers),
        MethodInfo(.login, "Login", .anyone, .withIdempotencyKey, .accountWorkers),
        MethodInfo(.logout, "Logout", .session, .unsafe, .customerShard),
        MethodInfo(.whoAmI, "WhoAmI", .session, .safe, .customerShard),
        MethodInfo(.watch, "Watch", .anyone, .safe, .eventLoop, streams: true),
        MethodInfo(.cancelWatch, "CancelWatch", .anyone, .unsafe, .eventLoop),
        MethodInfo(.stats, "Stats", .anyone, .safe, .eventLoop),
        MethodInfo(.searchProducts, "SearchProducts", .anyone, .safe, .catalogReader),
    ]

    /// The method whose name is `name` (as `MethodInfo.name` spells it).
    public static func named(_ name: String) -> MethodInfo? { all.first { $0.name == name } }
}

extension MethodField {
    /// This method's row of `MethodTable`.
    @inline(__always)
    public var info: MethodInfo { MethodTable.all[Int(rawValue) - 10] }
}
