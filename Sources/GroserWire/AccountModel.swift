/// A customer account, as the protocol shows it (never its password or hash).
public struct Account: Sendable, Hashable {
    /// Trimmed and lower-cased: the form accounts are compared in.
    public var email: String
    public var name: String
    public var createdAtUnix: Int64
    public init(email: String, name: String, createdAtUnix: Int64) {
        self.email = email
        self.name = name
        self.createdAtUnix = createdAtUnix
    }
}

/// Register's arguments.
public struct Registration: Sendable, Hashable, CustomStringConvertible {
    public var email: String
    public var password: String
    public var name: String
    public init(email: String, password: String, name: String) {
        self.email = email
        self.password = password
        self.name = name
    }
    /// Never the password: a request printed into a log must not carry it.
    public var description: String { "Registration(email: \(email), name: \(name), password: <\(password.utf8.count) bytes>)" }
}

/// Login's arguments.
public struct LoginDetails: Sendable, Hashable, CustomStringConvertible {
    public var email: String
    public var password: String
    /// The anonymous session whose carts merge into the account's; empty for none.
    public var guestSession: String
    public var idempotencyKey: String
    public init(email: String, password: String, guestSession: String = "", idempotencyKey: String = "") {
        self.email = email
        self.password = password
        self.guestSession = guestSession
        self.idempotencyKey = idempotencyKey
    }
    public var description: String { "LoginDetails(email: \(email), password: <\(password.utf8.count) bytes>, guest: \(!guestSession.isEmpty))" }
}

/// What a login did with one guest line.
public struct MergedLine: Sendable, Hashable {
    public var productUID: String
    public var guestQuantity: UInt32
    /// The account line's quantity after the merge (0 when not added).
    public var quantity: UInt32
    /// The account cart had the product: the quantities were added.
    public var summed: Bool
    /// Units over the line maximum that were not added.
    public var droppedUnits: UInt32
    /// The account cart was full: the line was not added.
    public var notAdded: Bool
    public init(productUID: String, guestQuantity: UInt32, quantity: UInt32, summed: Bool = false,
                droppedUnits: UInt32 = 0, notAdded: Bool = false) {
        self.productUID = productUID
        self.guestQuantity = guestQuantity
        self.quantity = quantity
        self.summed = summed
        self.droppedUnits = droppedUnits
        self.notAdded = notAdded
    }
}

/// One store's guest cart as merged into the account's cart there.
public struct MergedCart: Sendable, Hashable {
    public var storeUID: String
    public var lines: [MergedLine]
    /// The account cart's version after the merge.
    public var version: UInt64
    public init(storeUID: String, lines: [MergedLine], version: UInt64) {
        self.storeUID = storeUID
        self.lines = lines
        self.version = version
    }
}

/// Login's answer.
public struct LoginResult: Sendable, Hashable, CustomStringConvertible {
    /// A new session bound to the account.
    public var session: String
    public var account: Account
    /// One per store where the guest had lines, by store uid.
    public var merged: [MergedCart]
    public var quantityMaximum: UInt32
    public var cartLineMaximum: UInt32
    public init(session: String, account: Account, merged: [MergedCart], quantityMaximum: UInt32, cartLineMaximum: UInt32) {
        self.session = session
        self.account = account
        self.merged = merged
        self.quantityMaximum = quantityMaximum
        self.cartLineMaximum = cartLineMaximum
    }
    public var description: String { "LoginResult(account: \(account.email), merged: \(merged.count) cart(s))" }
}

/// WhoAmI's answer.
public struct Identity: Sendable, Hashable {
    /// Nil for an anonymous session.
    public var account: Account?
    public var sessionCreatedAtUnix: Int64
    public init(account: Account?, sessionCreatedAtUnix: Int64) {
        self.account = account
        self.sessionCreatedAtUnix = sessionCreatedAtUnix
    }
}
