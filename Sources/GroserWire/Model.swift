/// An amount of money in integer minor units of an ISO 4217 currency
/// (kopecks for RUB). Never a float.
public struct Money: Sendable, Hashable {
    /// The count of minor units: 8990 is 89.90 RUB.
    public var minorUnits: Int64
    /// The ISO 4217 code, e.g. "RUB".
    public var currency: String

    public init(minorUnits: Int64, currency: String) {
        self.minorUnits = minorUnits
        self.currency = currency
    }
}

/// One product on a shelf.
public struct Product: Sendable, Hashable {
    public var uid: String
    public var name: String
    public var brand: String
    /// "g", "ml" or "pcs".
    public var unit: String
    /// How many `unit`s one item holds: 930 for a 930 ml bottle.
    public var unitSize: UInt32
    public var price: Money
    /// Stored relative ("/img/p/123.jpg"); the daemon makes it absolute.
    public var imageURL: String
    public var outOfStock: Bool
    public var oftenOutOfStock: Bool
    public var shelfUID: String
    /// EAN-13 digits, or empty. Kept from the catalog for search (an
    /// all-digit query finds the product by it); the wire's `Product` has
    /// no such field, so answers do not carry it.
    public var barcode: String

    public init(uid: String, name: String, brand: String, unit: String, unitSize: UInt32,
                price: Money, imageURL: String, outOfStock: Bool, oftenOutOfStock: Bool,
                shelfUID: String, barcode: String = "") {
        self.uid = uid
        self.name = name
        self.brand = brand
        self.unit = unit
        self.unitSize = unitSize
        self.price = price
        self.imageURL = imageURL
        self.outOfStock = outOfStock
        self.oftenOutOfStock = oftenOutOfStock
        self.shelfUID = shelfUID
        self.barcode = barcode
    }
}

/// A shelf of a department. `products` is empty unless they were asked for;
/// `productCount` is always set.
public struct Shelf: Sendable, Hashable {
    public var uid: String
    public var name: String
    public var productCount: UInt32
    public var products: [Product]

    public init(uid: String, name: String, productCount: UInt32, products: [Product] = []) {
        self.uid = uid
        self.name = name
        self.productCount = productCount
        self.products = products
    }
}

/// A department of a store, with its shelves in display order.
public struct Department: Sendable, Hashable {
    public var uid: String
    public var name: String
    public var shelves: [Shelf]

    public init(uid: String, name: String, shelves: [Shelf]) {
        self.uid = uid
        self.name = name
        self.shelves = shelves
    }
}

/// A store without its catalog, as a city lists it.
public struct StoreSummary: Sendable, Hashable {
    public var uid: String
    public var name: String
    public var chain: String
    public var address: String
    public var cityUID: String

    public init(uid: String, name: String, chain: String, address: String, cityUID: String) {
        self.uid = uid
        self.name = name
        self.chain = chain
        self.address = address
        self.cityUID = cityUID
    }
}

/// A store with its departments.
public struct Store: Sendable, Hashable {
    public var summary: StoreSummary
    public var departments: [Department]

    public init(summary: StoreSummary, departments: [Department]) {
        self.summary = summary
        self.departments = departments
    }

    public var uid: String { summary.uid }
    public var name: String { summary.name }
}

/// A city the service delivers to, with its stores and its default store.
public struct City: Sendable, Hashable {
    public var uid: String
    /// Short upper-case code: "MSK", "SPB".
    public var code: String
    public var name: String
    public var stores: [StoreSummary]
    public var defaultStoreUID: String

    public init(uid: String, code: String, name: String, stores: [StoreSummary], defaultStoreUID: String) {
        self.uid = uid
        self.code = code
        self.name = name
        self.stores = stores
        self.defaultStoreUID = defaultStoreUID
    }
}

extension Money {
    /// How many digits of `currency`'s minor units follow the decimal point
    /// (ISO 4217's minor unit): 2 for RUB and USD, 0 for JPY and KRW, 3 for
    /// KWD. An unknown code is taken as 2, the common case.
    public static func exponent(of currency: String) -> Int {
        switch currency {
        case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV",
             "XAF", "XOF", "XPF": 0
        case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND": 3
        case "CLF", "UYW": 4
        default: 2
        }
    }
}
