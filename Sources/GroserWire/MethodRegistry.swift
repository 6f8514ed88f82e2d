/// The method registry: every method of protocol v1 declared once, with its
/// request and answer as Swift values (`RequestMethod`, `ResponseBody`), its
/// field in the envelopes' oneofs, its .proto messages, who may call it,
/// whether a client may resend it after a lost answer, which part of groserd
/// runs it, whether it streams and which of its strings have a length limit.
/// Everything else reads it, is generated from the .protos beside it
/// (Generated/, by tools/gen-wire-swift: `MethodField`, the envelopes'
/// conversions) or is checked against it by a test (MethodRegistryDriftTests):
/// the .proto files, docs/PROTOCOL.md's method table, the fuzz seeds and
/// dictionary, the client's wrappers, the Python client.
/// docs/ARCHITECTURE.md ("Adding a method") gives the recipe.
///
/// A field added to service.proto's oneofs fails to compile until its
/// `RequestMethod` and `ResponseBody` cases, `MethodField.entry` and
/// `RequestMethod.sessionToken` below name it: none of them has a `default:`.

/// The method a request calls, with its arguments.
public enum RequestMethod: Sendable, Hashable {
    case serverInfo
    case listCities
    /// `selector` is nil when the client set none (an invalid request).
    /// `knownStoreVersion`: the store version of an answer the caller holds
    /// (0: none); a current one is answered "not modified" with no body.
    case getStore(selector: StoreSelector?, includeProducts: Bool, knownStoreVersion: UInt64 = 0)
    case getShelf(shelfUID: String, knownStoreVersion: UInt64 = 0)
    case listProducts(ProductPageRequest)
    /// Operators: one request of a catalog import.
    case importCatalog(ImportChunk)
    /// Operators: one page of the catalog as records.
    case exportCatalog(ExportPageRequest)
    case openSession
    case getCart(session: String, storeUID: String, acceptPrices: Bool = false)
    case addItem(CartMutation, productUID: String, quantity: UInt32)
    case setQuantity(CartMutation, productUID: String, quantity: UInt32)
    case removeItem(CartMutation, productUID: String)
    case clearCart(CartMutation)
    // Indirect: CheckoutDetails (128 bytes) made every RequestMethod 129
    // bytes, and every copy of a request a memcpy of them.
    indirect case checkout(CheckoutDetails)
    case listOrders(session: String)
    case setProduct(ProductUpdate)
    case register(Registration)
    case login(LoginDetails)
    case logout(session: String)
    case whoAmI(session: String)
    /// Starts a stream of catalog changes of one store (PROTOCOL.md §7B).
    case watch(selector: StoreSelector?, sinceVersion: UInt64)
    /// Ends the watch started by the request `watchID` on this connection.
    case cancelWatch(watchID: UInt64)
    case stats
    /// Ranked products of one store for what a shopper typed (docs/SEARCH.md).
    indirect case searchProducts(SearchRequest)
    /// The stores of one city; `city` is nil when the client set none (an invalid request).
    case listStores(city: CitySelector?)
    /// Products of one store by uid, in the order asked.
    case getProducts(GetProductsRequest)
    /// No method this build knows: a newer client's, or none at all.
    case unknown
}

/// A response's body.
public enum ResponseBody: Sendable, Hashable {
    case none
    case serverInfo(ServerInfo)
    case listCities(CityList)
    case getStore(StoreCatalog)
    case getShelf(ShelfContents)
    case listProducts(ProductPage)
    case importCatalog(ImportResult)
    case exportCatalog(ExportPage)
    case openSession(session: String)
    /// The answer of GetCart and of every cart mutation.
    case cart(Cart)
    case checkout(Order)
    case listOrders([Order])
    case setProduct(ProductUpdateResult)
    case register(Account)
    case login(LoginResult)
    case logout
    case whoAmI(Identity)
    case watch(WatchEvent)
    case cancelWatch
    case stats(ServerStats)
    case searchProducts(SearchResults)
    case listStores(StoreList)
    case getProducts(GetProductsResponse)
}

/// One method's entry in the registry.
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
    /// The field's name in `Request.method` and `Response.body` (service.proto).
    public let oneofField: String
    /// The message types of the two fields, without the `groser.v1.` package.
    public let requestMessage: String
    public let responseMessage: String
    public let access: Access
    public let retry: Retry
    public let executor: Executor
    /// Answers with a stream of frames (`continues`), not one.
    public let streams: Bool
    /// The request's strings `FieldLimits` bounds, as its refusals name them
    /// (PROTOCOL.md §11); a test holds FieldLimits to exactly these.
    public let limitedFields: [String]
    /// The GroserClient method that calls it, in a sync and (when
    /// `clientAsync`) an async form; nil when the client has none (a watch
    /// is cancelled by ending its stream). A test finds each in Sources/GroserClient.
    public let clientWrapper: String?
    public let clientAsync: Bool

    init(_ field: MethodField, _ name: String, _ oneofField: String, _ requestMessage: String, _ responseMessage: String,
         _ access: Access, _ retry: Retry, _ executor: Executor, streams: Bool = false, limits limitedFields: [String] = [], client: String?, clientAsync: Bool = true) {
        self.field = field
        self.name = name
        self.oneofField = oneofField
        self.requestMessage = requestMessage
        self.responseMessage = responseMessage
        self.access = access
        self.retry = retry
        self.executor = executor
        self.streams = streams
        self.limitedFields = limitedFields
        self.clientWrapper = client
        self.clientAsync = clientAsync
    }

    /// Answered somewhere other than the event loop that read it.
    public var isDeferred: Bool { executor.isDeferred }
}

extension MethodInfo.Executor {
    /// Answered somewhere other than the event loop that read it.
    @inline(__always)
    public var isDeferred: Bool { self != .catalogReader && self != .eventLoop }
}

extension MethodField {
    private static let cartChange = ["session", "store_uid", "idempotency_key"]

    /// The method's registry entry. A switch, not a table, so that a new
    /// case cannot compile without one; `info` reads the table built from it.
    var entry: MethodInfo {
        switch self {
        case .serverInfo:
            MethodInfo(self, "ServerInfo", "server_info", "ServerInfoRequest", "ServerInfoResponse", .anyone, .safe, .catalogReader, client: "serverInfo")
        case .listCities:
            MethodInfo(self, "ListCities", "list_cities", "ListCitiesRequest", "ListCitiesResponse", .anyone, .safe, .catalogReader, client: "listCities")
        case .getStore:
            MethodInfo(self, "GetStore", "get_store", "GetStoreRequest", "GetStoreResponse", .anyone, .safe, .catalogReader, client: "store")
        case .getShelf:
            MethodInfo(self, "GetShelf", "get_shelf", "GetShelfRequest", "GetShelfResponse", .anyone, .safe, .catalogReader, client: "shelf")
        case .openSession:
            MethodInfo(self, "OpenSession", "open_session", "OpenSessionRequest", "OpenSessionResponse",
                       .anyone, .unsafe, .customerShard, client: "openSession")
        case .getCart:
            MethodInfo(self, "GetCart", "get_cart", "GetCartRequest", "CartResponse", .session, .safe, .customerShard,
                       limits: ["session", "store_uid"], client: "cart")
        case .addItem:
            MethodInfo(self, "AddItem", "add_item", "AddItemRequest", "CartResponse", .session, .withIdempotencyKey,
                       .customerShard, limits: Self.cartChange + ["product_uid"], client: "addItem")
        case .setQuantity:
            MethodInfo(self, "SetQuantity", "set_quantity", "SetQuantityRequest", "CartResponse", .session,
                       .withIdempotencyKey, .customerShard, limits: Self.cartChange + ["product_uid"], client: "setQuantity")
        case .removeItem:
            MethodInfo(self, "RemoveItem", "remove_item", "RemoveItemRequest", "CartResponse", .session,
                       .withIdempotencyKey, .customerShard, limits: Self.cartChange + ["product_uid"], client: "removeItem")
        case .clearCart:
            MethodInfo(self, "ClearCart", "clear_cart", "ClearCartRequest", "CartResponse", .session,
                       .withIdempotencyKey, .customerShard, limits: Self.cartChange, client: "clearCart")
        case .checkout:
            MethodInfo(self, "Checkout", "checkout", "CheckoutRequest", "CheckoutResponse", .session, .withIdempotencyKey,
                       .customerShard, limits: Self.cartChange + ["delivery_address", "card.number", "card.cvc", "card.holder_name"], client: "checkout")
        case .listOrders:
            MethodInfo(self, "ListOrders", "list_orders", "ListOrdersRequest", "ListOrdersResponse", .session, .safe,
                       .customerShard, limits: ["session"], client: "orders")
        case .setProduct:
            MethodInfo(self, "SetProduct", "set_product", "SetProductRequest", "SetProductResponse", .operators, .safe,
                       .commitQueue, limits: ["product_uid"], client: "setProduct")
        case .listProducts:
            MethodInfo(self, "ListProducts", "list_products", "ListProductsRequest", "ListProductsResponse",
                       .anyone, .safe, .catalogReader, client: "productPage")
        case .importCatalog:
            MethodInfo(self, "ImportCatalog", "import_catalog", "ImportCatalogRequest", "ImportCatalogResponse",
                       .operators, .safe, .importThread, client: "importCatalog", clientAsync: false)
        case .exportCatalog:
            MethodInfo(self, "ExportCatalog", "export_catalog", "ExportCatalogRequest", "ExportCatalogResponse",
                       .operators, .safe, .importThread, client: "exportPage", clientAsync: false)
        case .register:
            MethodInfo(self, "Register", "register", "RegisterRequest", "RegisterResponse", .anyone, .unsafe, .accountWorkers, client: "register")
        case .login:
            MethodInfo(self, "Login", "login", "LoginRequest", "LoginResponse", .anyone, .withIdempotencyKey,
                       .accountWorkers, limits: ["session", "idempotency_key"], client: "login")
        case .logout:
            MethodInfo(self, "Logout", "logout", "LogoutRequest", "LogoutResponse", .session, .unsafe, .customerShard,
                       limits: ["session"], client: "logout")
        case .whoAmI:
            MethodInfo(self, "WhoAmI", "who_am_i", "WhoAmIRequest", "WhoAmIResponse", .session, .safe, .customerShard,
                       limits: ["session"], client: "whoAmI")
        case .watch:
            MethodInfo(self, "Watch", "watch", "WatchRequest", "WatchEvent", .anyone, .safe, .eventLoop, streams: true, client: "watch")
        case .cancelWatch:
            MethodInfo(self, "CancelWatch", "cancel_watch", "CancelWatchRequest", "CancelWatchResponse",
                       .anyone, .unsafe, .eventLoop, client: nil)
        case .stats:
            MethodInfo(self, "Stats", "stats", "StatsRequest", "StatsResponse", .anyone, .safe, .eventLoop, client: "stats")
        case .searchProducts:
            MethodInfo(self, "SearchProducts", "search_products", "SearchProductsRequest", "SearchProductsResponse",
                       .anyone, .safe, .catalogReader, client: "search")
        case .listStores:
            MethodInfo(self, "ListStores", "list_stores", "ListStoresRequest", "ListStoresResponse",
                       .anyone, .safe, .catalogReader, client: "stores")
        case .getProducts:
            MethodInfo(self, "GetProducts", "get_products", "GetProductsRequest", "GetProductsResponse",
                       .anyone, .safe, .catalogReader, client: "products")
        }
    }

    /// This method's entry of `MethodTable`: an index, as it is read per request.
    @inline(__always)
    public var info: MethodInfo { MethodTable.all[Int(rawValue) - 10] }

    /// Which part of groserd answers it: read per request, from a table of
    /// the executors alone (`info` copies the whole entry, its strings and
    /// arrays retained and released: about 350 instructions a request).
    @inline(__always)
    public var executor: MethodInfo.Executor { MethodTable.executors[Int(rawValue) - 10] }
}

public enum MethodTable {
    /// Every method's entry, in field order from field 10 on.
    public static let all: [MethodInfo] = MethodField.allCases.map(\.entry)
    /// `all`'s executors, in the same order (`MethodField.executor`).
    public static let executors: [MethodInfo.Executor] = all.map(\.executor)

    /// The method whose name is `name` (as `MethodInfo.name` spells it).
    public static func named(_ name: String) -> MethodInfo? { all.first { $0.name == name } }
}

extension RequestMethod {
    /// The session the request acts for, if its method has one (Login's
    /// guest session is merged, not acted for: nil). Every method is named, so
    /// a new one must say whether it has a session.
    public var sessionToken: String? {
        switch self {
        case .getCart(let s, _, _), .listOrders(let s), .logout(let s), .whoAmI(let s): s
        case .addItem(let m, _, _), .setQuantity(let m, _, _), .removeItem(let m, _), .clearCart(let m): m.session
        case .checkout(let d): d.session
        case .login, .serverInfo, .listCities, .getStore, .getShelf, .listProducts, .importCatalog, .exportCatalog,
             .openSession, .setProduct, .register, .watch, .cancelWatch, .stats, .searchProducts, .listStores, .getProducts,
             .unknown:
            nil
        }
    }
}
