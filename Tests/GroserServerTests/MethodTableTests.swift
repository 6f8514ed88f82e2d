@testable import GroserServer
import GroserWire
import Testing

@Suite("the method table")
struct MethodTableTests {
    @Test func everyMethodHasOneRowInFieldOrder() {
        #expect(MethodTable.all.map(\.field) == MethodField.allCases)
        for field in MethodField.allCases { #expect(field.info.field == field) }
        #expect(Set(MethodTable.all.map(\.name)).count == MethodTable.all.count)
        #expect(MethodTable.named("GetStore")?.field == .getStore && MethodTable.named("getstore") == nil)
    }

    /// The table's executors and access (the dispatcher's routing by them
    /// is tested in DispatcherTests).
    @Test func theTableNamesTheExecutorsAndAccess() {
        #expect(MethodTable.all.filter { $0.executor == .importThread }.map(\.field) == [.importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter { $0.access == .operators }.map(\.field) == [.setProduct, .importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter(\.streams).map(\.field) == [.watch])
    }

    /// FieldLimits bounds exactly the strings each method's entry names: a
    /// request with one string (at any depth) far too long, for every string
    /// field of every request message, is refused naming that field, or not
    /// at all when the entry does not name it.
    @Test(arguments: MethodTable.all)
    func fieldLimitsCheckTheFieldsTheRegistryNames(_ info: MethodInfo) throws {
        var refused: Set<String> = []
        func walk(_ type: ProtoMessageInfo, _ path: [UInt32], _ names: [String]) {
            for field in type.fields where !field.isRepeated {
                switch field.type {
                case .string:
                    let method = try? Request.decode(ProtoMessage.request(
                        id: 1, deadlineMilliseconds: 0, method: info.field,
                        body: Self.message(type: ProtoSchema.requestMessage(for: info.field), setting: path + [field.number],
                                           to: String(repeating: "x", count: 5000)))).method
                    if let refusal = method.flatMap(FieldLimits.violation(in:)) {
                        let name = (names + [field.name]).dropFirst(names.first == "cart" ? 1 : 0).joined(separator: ".")
                        #expect(refusal.status.message.hasPrefix("The field \(name) is"), "\(refusal.status.message)")
                        refused.insert(name)
                    }
                case .message(let nested) where path.count < 3:
                    walk(ProtoSchema.message(named: nested)!, path + [field.number], names + [field.name])
                default:
                    continue
                }
            }
        }
        walk(ProtoSchema.requestMessage(for: info.field), [], [])
        #expect(refused == Set(info.limitedFields), "\(info.name)")
    }

    /// A message of `type` with only the string at `path` (field numbers, outermost first) set.
    static func message(type: ProtoMessageInfo, setting path: [UInt32], to value: String) -> ProtoMessage {
        var m = ProtoMessage(type.fullName)
        guard let first = path.first, let field = type.field(number: first) else { return m }
        if case .message(let nested) = field.type {
            m.fields[first] = [.message(message(type: ProtoSchema.message(named: nested)!, setting: Array(path.dropFirst()), to: value))]
        } else {
            m.fields[first] = [.string(value)]
        }
        return m
    }

    /// The token the router sends a request's shard by (`RequestMethod.sessionToken`):
    /// the session a method carries, and none for Login (its guest session is
    /// only merged) or the methods without one.
    @Test func theRouterSendsEachMethodByItsSession() {
        let mutation = CartMutation(session: "s1", storeUID: "store")
        let card = PaymentCard(number: "", expiryMonth: 1, expiryYear: 2030, cvc: "", holderName: "")
        let samples: [(RequestMethod, String?)] = [
            (.serverInfo, nil), (.openSession, nil), (.getCart(session: "s0", storeUID: "st"), "s0"),
            (.addItem(mutation, productUID: "p", quantity: 1), "s1"), (.clearCart(mutation), "s1"), (.whoAmI(session: "s2"), "s2"),
            (.login(LoginDetails(email: "e", password: "p", guestSession: "g")), nil),
            (.checkout(CheckoutDetails(session: "s3", storeUID: "st", expectedVersion: 1, deliveryAddress: "", card: card)), "s3"),
            (.listOrders(session: "s4"), "s4"), (.logout(session: "s5"), "s5"),
            (.setProduct(ProductUpdate(productUID: "p")), nil), (.unknown, nil),
        ]
        for (method, token) in samples { #expect(method.sessionToken == token, "\(method)") }
    }
}
