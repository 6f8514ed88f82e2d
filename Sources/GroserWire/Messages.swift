/// Which store GetStore asks for. A city means its default store.
public enum StoreSelector: Sendable, Hashable {
    case cityCode(String)
    case cityUID(String)
    case storeUID(String)
}

/// The method a request calls, with its arguments.
public enum RequestMethod: Sendable, Hashable {
    case serverInfo
    case listCities
    /// `selector` is nil when the client set none (an invalid request).
    case getStore(selector: StoreSelector?, includeProducts: Bool)
    case getShelf(shelfUID: String)
    case openSession
    case getCart(session: String, storeUID: String)
    case addItem(CartMutation, productUID: String, quantity: UInt32)
    case setQuantity(CartMutation, productUID: String, quantity: UInt32)
    case removeItem(CartMutation, productUID: String)
    case clearCart(CartMutation)
    case checkout(CheckoutDetails)
    case listOrders(session: String)
    case setProduct(ProductUpdate)
    /// No method this build knows: a newer client's, or none at all.
    case unknown
}

/// A client-to-server frame's message.
public struct Request: Sendable, Hashable {
    /// Chosen by the client, echoed in the response.
    public var id: UInt64
    /// Budget in milliseconds from when the server reads the frame; 0 for none.
    public var deadlineMilliseconds: UInt32
    public var method: RequestMethod

    public init(id: UInt64, deadlineMilliseconds: UInt32 = 0, method: RequestMethod) {
        self.id = id
        self.deadlineMilliseconds = deadlineMilliseconds
        self.method = method
    }
}

/// ServerInfo's answer.
public struct ServerInfo: Sendable, Hashable {
    public var serverVersion: String
    public var protocolVersion: UInt32
    public var uptimeMilliseconds: UInt64
    public var catalogVersion: UInt64
    public var methods: [String]

    public init(serverVersion: String, protocolVersion: UInt32, uptimeMilliseconds: UInt64,
                catalogVersion: UInt64, methods: [String]) {
        self.serverVersion = serverVersion
        self.protocolVersion = protocolVersion
        self.uptimeMilliseconds = uptimeMilliseconds
        self.catalogVersion = catalogVersion
        self.methods = methods
    }
}

/// ListCities' answer.
public struct CityList: Sendable, Hashable {
    public var cities: [City]
    public var catalogVersion: UInt64

    public init(cities: [City], catalogVersion: UInt64) {
        self.cities = cities
        self.catalogVersion = catalogVersion
    }
}

/// GetStore's answer: the store with its catalog, and its city.
public struct StoreCatalog: Sendable, Hashable {
    public var store: Store
    public var city: City
    public var catalogVersion: UInt64

    public init(store: Store, city: City, catalogVersion: UInt64) {
        self.store = store
        self.city = city
        self.catalogVersion = catalogVersion
    }
}

/// GetShelf's answer: the shelf with its products sorted by name.
public struct ShelfContents: Sendable, Hashable {
    public var shelf: Shelf
    public var storeUID: String
    public var departmentUID: String
    public var catalogVersion: UInt64

    public init(shelf: Shelf, storeUID: String, departmentUID: String, catalogVersion: UInt64) {
        self.shelf = shelf
        self.storeUID = storeUID
        self.departmentUID = departmentUID
        self.catalogVersion = catalogVersion
    }
}

/// A response's body.
public enum ResponseBody: Sendable, Hashable {
    case none
    case serverInfo(ServerInfo)
    case listCities(CityList)
    case getStore(StoreCatalog)
    case getShelf(ShelfContents)
    case openSession(session: String)
    /// The answer of GetCart and of every cart mutation.
    case cart(Cart)
    case checkout(Order)
    case listOrders([Order])
    case setProduct(ProductUpdateResult)
}

/// A server-to-client frame's message.
public struct Response: Sendable, Hashable {
    public var id: UInt64
    public var status: Status
    public var body: ResponseBody

    public init(id: UInt64, status: Status = .ok, body: ResponseBody = .none) {
        self.id = id
        self.status = status
        self.body = body
    }
}

/// Why bytes could not be read as a message.
public struct DecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
    /// The frame was refused unread: it has more fields than
    /// `Request.maximumFieldCount`, which would make protobuf-c's unpack cost
    /// many times its size.
    public var tooManyFields: Bool

    public init(_ description: String, tooManyFields: Bool = false) {
        self.description = description
        self.tooManyFields = tooManyFields
    }
}
