import GroserStorage
import GroserSystem
import GroserWire

/// The answer of one commerce request.
public enum CommerceOutcome: Sendable, Hashable {
    case ok(MethodField, [UInt8])
    case failed(Status)
}

/// Limits a cart obeys.
public struct CartLimits: Sendable {
    /// The most units of one product in a cart.
    public var maximumQuantity: UInt32 = 99
    /// The most lines in a cart.
    public var maximumLines = 200
    public init(maximumQuantity: UInt32 = 99, maximumLines: Int = 200) {
        self.maximumQuantity = maximumQuantity
        self.maximumLines = maximumLines
    }
}

/// A request's failure as a status: thrown inside the rules, caught once
/// and sent as the response's status.
public struct Refusal: Error, Sendable, Hashable {
    public var status: Status
    public init(_ code: StatusCode, _ message: String) { status = Status(code, message) }
}

/// Who sent a request, from the socket's peer credentials.
public struct Caller: Sendable, Hashable {
    public var uid: UInt32?
    public var gid: UInt32?
    public init(uid: UInt32?, gid: UInt32? = nil) {
        self.uid = uid
        self.gid = gid
    }
}

/// The rules of catalog updates (SetProduct), run inside a write
/// transaction by the commit queue. Carts and checkout are the customer
/// shards' (`CartRules`, `CustomerShard`).
public struct CommerceService: Sendable {
    /// Users who may change the catalog besides root.
    public var adminUIDs: Set<UInt32>
    /// Members of this group may change the catalog too.
    public var adminGroup: UInt32?
    /// Group membership, from the system's databases unless a test says otherwise.
    public var isMember: @Sendable (_ uid: UInt32, _ gid: UInt32, _ group: UInt32) -> Bool = Accounts.isMember
    public var imageBaseURL: String

    public init(adminUIDs: Set<UInt32>, adminGroup: UInt32? = nil, imageBaseURL: String) {
        self.adminUIDs = adminUIDs
        self.adminGroup = adminGroup
        self.imageBaseURL = imageBaseURL
    }

    /// Runs one request in its own savepoint: a refused request leaves no
    /// partial change behind, whatever else the transaction holds.
    /// `catalogChanged` is true when the catalog's version moved. Throws only
    /// when the savepoint itself fails (the transaction is then unusable).
    public func execute(_ method: RequestMethod, caller: Caller,
                        in tx: any CommerceTransaction) throws(StorageError) -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        try tx.savepoint()
        let result: (outcome: CommerceOutcome, catalogChanged: Bool)
        do {
            result = try run(method, caller: caller, tx)
        } catch let refusal as Refusal {
            result = (.failed(refusal.status), false)
        } catch let error as StorageError {
            result = (.failed(Status(.internal, "The store failed: \(error.description).")), false)
        } catch {
            result = (.failed(Status(.internal, "Unexpected error: \(error).")), false)
        }
        if case .failed = result.outcome {
            try tx.rollbackToSavepoint()
            return (result.outcome, false)
        }
        try tx.releaseSavepoint()
        return result
    }

    private func run(_ method: RequestMethod, caller: Caller, _ tx: any CommerceTransaction) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        if let refusal = FieldLimits.violation(in: method) { throw refusal }
        switch method {
        case .setProduct(let update):
            return try setProduct(update, caller: caller, tx)
        default:
            throw Refusal(.unimplemented, "The catalog writer does not answer this method.")
        }
    }

    // MARK: Operators

    private func setProduct(_ u: ProductUpdate, caller: Caller, _ tx: any CommerceTransaction) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        guard isOperator(caller) else {
            throw Refusal(.permissionDenied, "Only groserd's own user, root or an admin group member may change the catalog.")
        }
        guard u.priceMinorUnits != nil || u.stock != nil else {
            throw Refusal(.invalidArgument, "SetProduct needs a new price, a new stock, or both.")
        }
        if let price = u.priceMinorUnits, price < 0 {
            throw Refusal(.invalidArgument, "A price cannot be negative.")
        }
        guard try tx.product(u.productUID) != nil else {
            throw Refusal(.notFound, "No product has the uid \"\(clip(u.productUID))\".")
        }
        try tx.updateProduct(u)
        let version = try tx.bumpCatalogVersion(touching: [u.productUID])
        guard let (product, stock) = try tx.catalogProduct(u.productUID) else {
            throw Refusal(.internal, "The product vanished while it was being changed.")
        }
        var served = product
        served.imageURL = ImageURL.absolute(product.imageURL, base: imageBaseURL)
        let body = BodyEncoder.setProduct(ProductUpdateResult(product: served, stock: stock, catalogVersion: version))
        return (.ok(.setProduct, body), true)
    }

    // MARK: Shared checks

    /// Root, groserd's own user and members of the admin group may change
    /// the catalog (SetProduct, imports).
    public func isOperator(_ caller: Caller) -> Bool {
        guard let uid = caller.uid else { return false }
        return uid == 0 || adminUIDs.contains(uid) || adminGroup.map({ isMember(uid, caller.gid ?? UInt32.max, $0) }) == true
    }
}

extension String {
    var trimmingCharacters: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
