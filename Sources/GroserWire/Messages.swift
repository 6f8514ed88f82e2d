/// Which store GetStore asks for. A city means its default store.
public enum StoreSelector: Sendable, Hashable {
    case cityCode(String)
    case cityUID(String)
    case storeUID(String)
}

/// Which city ListStores asks for.
public enum CitySelector: Sendable, Hashable {
    /// Matched case-insensitively.
    case code(String)
    case uid(String)
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

/// ListStores' answer: one city's stores, ordered by uid.
public struct StoreList: Sendable, Hashable {
    public var stores: [StoreListing]
    public var cityUID: String
    public var catalogVersion: UInt64

    public init(stores: [StoreListing], cityUID: String, catalogVersion: UInt64) {
        self.stores = stores
        self.cityUID = cityUID
        self.catalogVersion = catalogVersion
    }
}

/// One store of ListStores.
public struct StoreListing: Sendable, Hashable {
    public var summary: StoreSummary
    /// The store is its city's default store (GetStore by city answers it).
    public var isDefault: Bool
    /// As GetStore would answer it for this store.
    public var storeVersion: UInt64

    public init(summary: StoreSummary, isDefault: Bool, storeVersion: UInt64) {
        self.summary = summary
        self.isDefault = isDefault
        self.storeVersion = storeVersion
    }
}

/// GetStore's answer: the store with its catalog, and its city.
public struct StoreCatalog: Sendable, Hashable {
    public var store: Store
    public var city: City
    public var catalogVersion: UInt64
    /// Grows whenever anything this store shows changes.
    public var storeVersion: UInt64
    /// The caller's known version is current: `store` and `city` are empty.
    public var notModified: Bool

    public init(store: Store, city: City, catalogVersion: UInt64, storeVersion: UInt64 = 0, notModified: Bool = false) {
        self.store = store
        self.city = city
        self.catalogVersion = catalogVersion
        self.storeVersion = storeVersion
        self.notModified = notModified
    }
}

/// GetShelf's answer: the shelf with its products sorted by name.
public struct ShelfContents: Sendable, Hashable {
    public var shelf: Shelf
    public var storeUID: String
    public var departmentUID: String
    public var catalogVersion: UInt64
    /// The version of the shelf's store.
    public var storeVersion: UInt64
    /// The caller's known version is current: `shelf` is empty.
    public var notModified: Bool

    public init(shelf: Shelf, storeUID: String, departmentUID: String, catalogVersion: UInt64,
                storeVersion: UInt64 = 0, notModified: Bool = false) {
        self.shelf = shelf
        self.storeUID = storeUID
        self.departmentUID = departmentUID
        self.catalogVersion = catalogVersion
        self.storeVersion = storeVersion
        self.notModified = notModified
    }
}

/// ListProducts' request: one page of a store's (or one shelf's) products.
public struct ProductPageRequest: Sendable, Hashable {
    public var storeUID: String
    /// Empty: the whole store.
    public var shelfUID: String
    /// 0 asks for the default (100); at most 1000.
    public var pageSize: UInt32
    /// Empty for the first page; else the previous page's `nextPageToken`.
    public var pageToken: String

    public init(storeUID: String, shelfUID: String = "", pageSize: UInt32 = 0, pageToken: String = "") {
        self.storeUID = storeUID
        self.shelfUID = shelfUID
        self.pageSize = pageSize
        self.pageToken = pageToken
    }
}

/// ListProducts' answer.
public struct ProductPage: Sendable, Hashable {
    public var products: [Product]
    /// Empty on the last page.
    public var nextPageToken: String
    public var storeVersion: UInt64
    /// Products in the store (or the shelf) in all.
    public var totalSize: UInt32

    public init(products: [Product], nextPageToken: String, storeVersion: UInt64, totalSize: UInt32) {
        self.products = products
        self.nextPageToken = nextPageToken
        self.storeVersion = storeVersion
        self.totalSize = totalSize
    }
}

/// A server-to-client frame's message.
public struct Response: Sendable, Hashable {
    public var id: UInt64
    public var status: Status
    public var body: ResponseBody
    /// More frames with this id follow (a watch's stream).
    public var continues: Bool

    public init(id: UInt64, status: Status = .ok, body: ResponseBody = .none, continues: Bool = false) {
        self.id = id
        self.status = status
        self.body = body
        self.continues = continues
    }
}

/// Why bytes could not be read as a message. Not named DecodingError:
/// GroserClient re-exports this module, and that name would hide
/// Swift's own `DecodingError` in every file of a client that imports it.
public struct WireDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
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

/// SearchProducts' request (docs/SEARCH.md).
public struct SearchRequest: Sendable, Hashable {
    /// nil when the client set none (an invalid request).
    public var selector: StoreSelector?
    public var query: String
    /// 0 asks for the default (20); at most 100.
    public var pageSize: UInt32
    public var pageToken: String
    public var inStockOnly: Bool
    /// At most one of the two: only that department's or shelf's products.
    public var departmentUID: String
    public var shelfUID: String
    /// The page's hits shelf by shelf.
    public var groupByShelf: Bool

    public init(selector: StoreSelector?, query: String, pageSize: UInt32 = 0, pageToken: String = "",
                inStockOnly: Bool = false, departmentUID: String = "", shelfUID: String = "", groupByShelf: Bool = false) {
        self.selector = selector
        self.query = query
        self.pageSize = pageSize
        self.pageToken = pageToken
        self.inStockOnly = inStockOnly
        self.departmentUID = departmentUID
        self.shelfUID = shelfUID
        self.groupByShelf = groupByShelf
    }
}

/// A run of a product's name that matched: UTF-8 byte offsets into the name.
public struct TextRange: Sendable, Hashable {
    public var start: UInt32
    public var length: UInt32
    public init(start: UInt32, length: UInt32) {
        self.start = start
        self.length = length
    }
}

/// One product a search found.
public struct SearchHit: Sendable, Hashable {
    public var product: Product
    public var highlights: [TextRange]
    public var matchedWords: UInt32
    public var shelfName: String
    public var departmentUID: String
    public var departmentName: String

    public init(product: Product, highlights: [TextRange], matchedWords: UInt32, shelfName: String,
                departmentUID: String, departmentName: String) {
        self.product = product
        self.highlights = highlights
        self.matchedWords = matchedWords
        self.shelfName = shelfName
        self.departmentUID = departmentUID
        self.departmentName = departmentName
    }
}

/// SearchProducts' answer: one page of hits.
public struct SearchResults: Sendable, Hashable {
    public var hits: [SearchHit]
    public var totalEstimate: UInt32
    /// Empty on the last page.
    public var nextPageToken: String
    public var queryUsed: String
    public var layoutSwitched: Bool
    public var storeUID: String
    public var storeVersion: UInt64

    public init(hits: [SearchHit], totalEstimate: UInt32, nextPageToken: String, queryUsed: String,
                layoutSwitched: Bool, storeUID: String, storeVersion: UInt64) {
        self.hits = hits
        self.totalEstimate = totalEstimate
        self.nextPageToken = nextPageToken
        self.queryUsed = queryUsed
        self.layoutSwitched = layoutSwitched
        self.storeUID = storeUID
        self.storeVersion = storeVersion
    }
}
