import GroserClient
import Testing

/// Which requests the client sends again on a fresh connection after a
/// pooled one failed: what the method registry says of each method.
@Suite("the client's resends follow the registry")
struct ClientRetryTests {
    @Test(arguments: MethodTable.all)
    func aRequestWithoutAKeyIsResentOnlyWhenTheRegistrySaysSafe(_ info: MethodInfo) throws {
        let method = try #require(RequestMethod.zeroValued(info.field))
        #expect(method.isSafeToRetry == (info.retry == .safe), "\(info.name)")
    }

    @Test func aChangeWithItsIdempotencyKeyIsResent() {
        let keyed = CartMutation(session: "s", storeUID: "store", idempotencyKey: "k")
        let card = PaymentCard(number: "4111", expiryMonth: 1, expiryYear: 2030, cvc: "1", holderName: "A")
        let methods: [RequestMethod] = [
            .addItem(keyed, productUID: "p", quantity: 1), .setQuantity(keyed, productUID: "p", quantity: 2),
            .removeItem(keyed, productUID: "p"), .clearCart(keyed),
            .checkout(CheckoutDetails(session: "s", storeUID: "store", expectedVersion: 1, deliveryAddress: "a", card: card,
                                      idempotencyKey: "k")),
            .login(LoginDetails(email: "e", password: "p", idempotencyKey: "k")),
        ]
        for m in methods { #expect(m.isSafeToRetry, "\(m.field!)") }
        #expect(!RequestMethod.openSession.isSafeToRetry && !RequestMethod.logout(session: "s").isSafeToRetry)
        #expect(RequestMethod.unknown.isSafeToRetry)
    }
}
