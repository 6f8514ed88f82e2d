/// The fields every cart mutation carries.
public struct CartMutation: Sendable, Hashable {
    /// The session token from OpenSession.
    public var session: String
    /// Carts belong to (session, store).
    public var storeUID: String
    /// A retry with the same key returns the first answer and changes nothing.
    public var idempotencyKey: String
    /// The cart version the caller saw; 0 skips the check.
    public var expectedVersion: UInt64

    public init(session: String, storeUID: String, idempotencyKey: String = "", expectedVersion: UInt64 = 0) {
        self.session = session
        self.storeUID = storeUID
        self.idempotencyKey = idempotencyKey
        self.expectedVersion = expectedVersion
    }
}

/// One product's line in a cart.
public struct CartLine: Sendable, Hashable {
    public var productUID: String
    public var name: String
    /// The catalog's current price.
    public var unitPrice: Money
    public var quantity: UInt32
    public var lineTotal: Money
    /// The price changed since the customer last saw the line.
    public var priceChanged: Bool
    /// The price the customer saw, when it changed.
    public var previousPrice: Money?
    public var outOfStock: Bool

    public init(productUID: String, name: String, unitPrice: Money, quantity: UInt32, lineTotal: Money,
                priceChanged: Bool = false, previousPrice: Money? = nil, outOfStock: Bool = false) {
        self.productUID = productUID
        self.name = name
        self.unitPrice = unitPrice
        self.quantity = quantity
        self.lineTotal = lineTotal
        self.priceChanged = priceChanged
        self.previousPrice = previousPrice
        self.outOfStock = outOfStock
    }
}

/// A customer's cart at one store.
public struct Cart: Sendable, Hashable {
    public var storeUID: String
    /// In the order products were first added.
    public var lines: [CartLine]
    public var subtotal: Money
    /// The sum of the lines' quantities.
    public var itemCount: UInt32
    public var currency: String
    /// Grows with every change; 0 before the first.
    public var version: UInt64

    public init(storeUID: String, lines: [CartLine], subtotal: Money, itemCount: UInt32, currency: String, version: UInt64) {
        self.storeUID = storeUID
        self.lines = lines
        self.subtotal = subtotal
        self.itemCount = itemCount
        self.currency = currency
        self.version = version
    }
}

/// A payment card as the customer typed it. Its description never shows
/// the number or the CVC, so it cannot leak into a log by accident.
public struct PaymentCard: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public var number: String
    public var expiryMonth: UInt32
    public var expiryYear: UInt32
    public var cvc: String
    public var holderName: String

    public init(number: String, expiryMonth: UInt32, expiryYear: UInt32, cvc: String, holderName: String) {
        self.number = number
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
        self.cvc = cvc
        self.holderName = holderName
    }

    public var description: String { "card expiring \(expiryMonth)/\(expiryYear) (number and CVC withheld)" }
    public var debugDescription: String { description }
}

/// What Checkout needs.
public struct CheckoutDetails: Sendable, Hashable {
    public var session: String
    public var storeUID: String
    /// The version of the cart the customer confirmed.
    public var expectedVersion: UInt64
    public var deliveryAddress: String
    public var card: PaymentCard
    public var idempotencyKey: String

    public init(session: String, storeUID: String, expectedVersion: UInt64, deliveryAddress: String,
                card: PaymentCard, idempotencyKey: String = "") {
        self.session = session
        self.storeUID = storeUID
        self.expectedVersion = expectedVersion
        self.deliveryAddress = deliveryAddress
        self.card = card
        self.idempotencyKey = idempotencyKey
    }
}

/// One line of a placed order.
public struct OrderLine: Sendable, Hashable {
    public var productUID: String
    public var name: String
    public var unitPrice: Money
    public var quantity: UInt32
    public var lineTotal: Money

    public init(productUID: String, name: String, unitPrice: Money, quantity: UInt32, lineTotal: Money) {
        self.productUID = productUID
        self.name = name
        self.unitPrice = unitPrice
        self.quantity = quantity
        self.lineTotal = lineTotal
    }
}

/// A placed order. It keeps the card's brand and last four digits only.
public struct Order: Sendable, Hashable {
    public var number: String
    public var storeUID: String
    public var cityCode: String
    public var lines: [OrderLine]
    public var total: Money
    public var cardBrand: String
    public var cardLast4: String
    public var createdAtUnix: Int64
    public var deliveryAddress: String
    public var holderName: String

    public init(number: String, storeUID: String, cityCode: String, lines: [OrderLine], total: Money,
                cardBrand: String, cardLast4: String, createdAtUnix: Int64, deliveryAddress: String, holderName: String) {
        self.number = number
        self.storeUID = storeUID
        self.cityCode = cityCode
        self.lines = lines
        self.total = total
        self.cardBrand = cardBrand
        self.cardLast4 = cardLast4
        self.createdAtUnix = createdAtUnix
        self.deliveryAddress = deliveryAddress
        self.holderName = holderName
    }
}

/// An operator's change to one product; nil keeps a value.
public struct ProductUpdate: Sendable, Hashable {
    public var productUID: String
    public var priceMinorUnits: Int64?
    public var stock: UInt32?

    public init(productUID: String, priceMinorUnits: Int64? = nil, stock: UInt32? = nil) {
        self.productUID = productUID
        self.priceMinorUnits = priceMinorUnits
        self.stock = stock
    }
}

/// The product after an operator's change.
public struct ProductUpdateResult: Sendable, Hashable {
    public var product: Product
    public var stock: UInt32
    public var catalogVersion: UInt64

    public init(product: Product, stock: UInt32, catalogVersion: UInt64) {
        self.product = product
        self.stock = stock
        self.catalogVersion = catalogVersion
    }
}
