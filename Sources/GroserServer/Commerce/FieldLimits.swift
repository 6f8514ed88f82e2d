import GroserWire

/// The longest value each client string of a commerce request may have, in
/// UTF-8 bytes. Everything a customer sends is kept (orders, idempotency
/// records), so each string has a bound: a request past one is refused with
/// INVALID_ARGUMENT naming the field, before anything is looked up or stored.
/// docs/PROTOCOL.md lists the same figures.
public enum FieldLimits {
    /// Session tokens are 32 hex digits; a little room for other forms.
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
        var fields: [(name: String, value: String, limit: Int)] = []
        func mutation(_ m: CartMutation) {
            fields += [("session", m.session, session), ("store_uid", m.storeUID, uid),
                       ("idempotency_key", m.idempotencyKey, idempotencyKey)]
        }
        switch method {
        case .getCart(let s, let store):
            fields = [("session", s, session), ("store_uid", store, uid)]
        case .addItem(let m, let product, _), .setQuantity(let m, let product, _), .removeItem(let m, let product):
            mutation(m)
            fields.append(("product_uid", product, uid))
        case .clearCart(let m):
            mutation(m)
        case .checkout(let d):
            fields = [("session", d.session, session), ("store_uid", d.storeUID, uid),
                      ("idempotency_key", d.idempotencyKey, idempotencyKey),
                      ("delivery_address", d.deliveryAddress, deliveryAddress),
                      ("card.number", d.card.number, cardNumber), ("card.cvc", d.card.cvc, cvc),
                      ("card.holder_name", d.card.holderName, holderName)]
        case .listOrders(let s):
            fields = [("session", s, session)]
        case .setProduct(let u):
            fields = [("product_uid", u.productUID, uid)]
        default:
            return nil
        }
        for f in fields where f.value.utf8.count > f.limit {
            return Refusal(.invalidArgument, "The field \(f.name) is \(f.value.utf8.count) bytes long; at most \(f.limit) are accepted.")
        }
        return nil
    }
}
