import GroserWire

/// The longest value each client string of a commerce request may have, in
/// UTF-8 bytes. Everything a customer sends is kept (orders, idempotency
/// records), so each string has a bound: a request past one is refused with
/// INVALID_ARGUMENT naming the field, before anything is looked up or stored.
/// docs/PROTOCOL.md lists the same figures; each method's entry in the registry
/// (`MethodInfo.limitedFields`) names the fields checked here, and a test
/// (MethodTableTests) holds the two together for every method: a new method
/// whose entry names fields fails it until they are checked here.
public enum FieldLimits {
    /// Session tokens are 64 hex digits (OpenSession's) or 32 (a login's).
    public static let session = 64
    /// Store, product, shelf and city identifiers.
    public static let uid = 128
    public static let idempotencyKey = 128
    public static let deliveryAddress = 1024
    public static let holderName = 256
    /// Digits, spaces and dashes of a card number.
    public static let cardNumber = 32
    public static let cvc = 8

    /// The refusal for the first string of `method` that is too long, or nil.
    public static func violation(in method: RequestMethod) -> Refusal? {
        // Checked field by field, with no array of fields: this runs for
        // every cart request, and building one showed in the profile.
        func over(_ name: String, _ value: String, _ limit: Int) -> Refusal? {
            let n = value.utf8.count
            guard n > limit else { return nil }
            return Refusal(.invalidArgument, "The field \(name) is \(n) bytes long; at most \(limit) are accepted.")
        }
        func mutation(_ m: CartMutation) -> Refusal? {
            over("session", m.session, session) ?? over("store_uid", m.storeUID, uid)
                ?? over("idempotency_key", m.idempotencyKey, idempotencyKey)
        }
        switch method {
        case .getCart(let s, let store, _):
            return over("session", s, session) ?? over("store_uid", store, uid)
        case .addItem(let m, let product, _), .setQuantity(let m, let product, _), .removeItem(let m, let product):
            return mutation(m) ?? over("product_uid", product, uid)
        case .clearCart(let m):
            return mutation(m)
        case .checkout(let d):
            return over("session", d.session, session) ?? over("store_uid", d.storeUID, uid)
                ?? over("idempotency_key", d.idempotencyKey, idempotencyKey)
                ?? over("delivery_address", d.deliveryAddress, deliveryAddress)
                ?? over("card.number", d.card.number, cardNumber) ?? over("card.cvc", d.card.cvc, cvc)
                ?? over("card.holder_name", d.card.holderName, holderName)
        case .listOrders(let s), .logout(let s), .whoAmI(let s):
            return over("session", s, session)
        case .login(let d):
            return over("session", d.guestSession, session) ?? over("idempotency_key", d.idempotencyKey, idempotencyKey)
        case .setProduct(let u):
            return over("product_uid", u.productUID, uid)
        default:
            return nil
        }
    }
}
