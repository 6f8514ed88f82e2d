@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// The account rules as pure functions (LoginThrottleTests has the
/// throttle), the password hash, and a merge a crash interrupted (finished by the
/// next start from the real customer log).
@Suite("account rules")
struct AccountRulesTests {
    let rules = AccountRules(limits: CartLimits(maximumQuantity: 10, maximumLines: 3))

    func cart(_ version: UInt64, _ lines: [(String, UInt32)]) -> StoredCart {
        StoredCart(version: version, lines: lines.map { CartLineRecord(productUID: $0.0, quantity: $0.1, seenPriceMinorUnits: 100) })
    }

    @Test func sameProductsAreSummedOthersAppendedInTheGuestsOrder() {
        let (carts, merged) = rules.merge(guest: ["s": cart(4, [("b", 2), ("a", 3)])], into: ["s": cart(7, [("a", 1)])])
        #expect(carts["s"]?.lines.map(\.productUID) == ["a", "b"])
        #expect(carts["s"]?.lines.map(\.quantity) == [4, 2])
        #expect(carts["s"]?.version == 8, "the account cart moves to a new version")
        #expect(merged == [MergedCart(storeUID: "s", lines: [
            MergedLine(productUID: "b", guestQuantity: 2, quantity: 2),
            MergedLine(productUID: "a", guestQuantity: 3, quantity: 4, summed: true),
        ], version: 8)])
    }

    @Test func theLineMaximumCapsASumAndTheFullCartIsNamed() {
        let (carts, merged) = rules.merge(guest: ["s": cart(1, [("a", 8), ("x", 1), ("y", 2)])],
                                          into: ["s": cart(2, [("a", 5), ("b", 1)])])
        #expect(carts["s"]?.lines.map(\.quantity) == [10, 1, 1])
        #expect(merged[0].lines[0] == MergedLine(productUID: "a", guestQuantity: 8, quantity: 10, summed: true, droppedUnits: 3))
        #expect(merged[0].lines[2] == MergedLine(productUID: "y", guestQuantity: 2, quantity: 0, droppedUnits: 2, notAdded: true))
    }

    @Test func everyStoreMergesAndEmptyGuestCartsAreSkipped() {
        let (carts, merged) = rules.merge(guest: ["z": cart(1, [("p", 1)]), "a": cart(3, [("q", 2)]), "e": cart(5, [])],
                                          into: ["m": cart(9, [("r", 1)])])
        #expect(merged.map(\.storeUID) == ["a", "z"])
        #expect(Set(carts.keys) == ["a", "z"], "the account's other carts are left as they are")
        #expect(carts["a"]?.version == 1)
    }

    @Test func emailsAreTrimmedAndLowerCasedAndChecked() throws {
        #expect(AccountRules.normalizedEmail("  Ann@Example.COM\n") == "ann@example.com")
        // NFC bytes (Strings compare equal either way; the bytes make the key).
        #expect(Array(AccountRules.normalizedEmail("JOSE\u{301}@x.co").utf8) == Array("jos\u{E9}@x.co".utf8))
        #expect(Array(AccountRules.legacyNormalizedEmail("JOSE\u{301}@x.co").utf8) == Array("jose\u{301}@x.co".utf8))
        #expect(try rules.check(Registration(email: " A@B.co ", password: "12345678", name: " Ann ")) == ("a@b.co", "Ann"))
        for bad in ["", "ann", "@b.co", "a@b", "a@.co", "a b@c.co", String(repeating: "a", count: 250) + "@b.co"] {
            #expect(throws: Refusal.self) { _ = try rules.check(Registration(email: bad, password: "12345678", name: "A")) }
        }
        #expect(throws: Refusal.self) { _ = try rules.check(Registration(email: "a@b.co", password: "1234567", name: "A")) }
        #expect(throws: Refusal.self) { _ = try rules.check(Registration(email: "a@b.co", password: "12345678", name: "A\u{7}")) }
    }

    @Test func aRegistrationPrintsNoPassword() {
        let r = Registration(email: "a@b.co", password: "hunter2-secret", name: "A")
        #expect(!"\(r)".contains("hunter2"))
        #expect(!"\(LoginDetails(email: "a@b.co", password: "hunter2-secret"))".contains("hunter2"))
        #expect(!"\(Request(id: 1, method: .register(r)))".contains("hunter2"))
    }

    @Test func passwordHashesAreArgon2idAndVerify() {
        let hash = PasswordHash.make("correct horse")
        #expect(hash?.hasPrefix("$argon2id$") == true)
        #expect(hash?.contains("correct") == false)
        #expect(PasswordHash.verify("correct horse", hash: hash ?? ""))
        #expect(!PasswordHash.verify("correct horse!", hash: hash ?? ""))
        #expect(!PasswordHash.verify("correct horse", hash: "not a hash"))
        #expect(PasswordHash.make("correct horse") != hash, "salted")
    }

    @Test func aMergeACrashInterruptedIsFinishedByTheNextStart() throws {
        let directory = try ScratchDirectory()
        let store = try SQLiteCatalogStore(directory: directory.path)
        let catalog = try CatalogService(store: store, imageBaseURL: "http://img.test:8080")
        let options = CustomerService.Options(directory: directory.path + "/customers")
        let quiet = Logger(level: .error, sink: { _ in })
        var customers: CustomerService? = try CustomerService(options, catalog: catalog, orders: store, logger: quiet)
        func answer(_ method: RequestMethod) throws -> [UInt8] {
            guard case .ok(_, let body) = customers!.answerNow(Request(id: 1, method: method)) else {
                throw SetupError("\(method) was refused: \(customers!.answerNow(Request(id: 1, method: method)))")
            }
            return body
        }
        _ = try answer(.register(Registration(email: "crash@example.com", password: "correct horse", name: "C")))
        guard case .openSession(let guest)? = try? Response.decode(frameOf(.openSession, answer(.openSession))).body else {
            throw SetupError("no session")
        }
        let storeUID = "store-spb-1"
        let uid = try #require(sample.stores.first { $0.uid == storeUID }?.departments.first?.shelves.first?.products.first?.uid)
        _ = try answer(.addItem(CartMutation(session: guest, storeUID: storeUID), productUID: uid, quantity: 2))
        // The first step of a login, then a crash: the guest is sealed.
        let owner = SessionKey(accountEmail: "crash@example.com")
        let g = SessionKey(token: guest)
        let shards = customers!.shards
        guard case .answer(.guestCarts(let carts?)) = shards[g.shard(of: shards.count)].runNow(.seal(guest: g, owner: owner),
                                                                                                for: Request(id: 0, method: .unknown)) else {
            throw SetupError("the seal failed")
        }
        #expect(carts[storeUID]?.lines.first?.quantity == 2)
        if case .ok = customers!.answerNow(Request(id: 1, method: .getCart(session: guest, storeUID: storeUID))) {
            Issue.record("a sealed guest takes no more requests")
        }
        customers = nil
        customers = try CustomerService(options, catalog: catalog, orders: store, logger: quiet)
        let body = try answer(.login(LoginDetails(email: "crash@example.com", password: "correct horse", guestSession: guest)))
        let login = try #require(BodyEncoder.decodeLogin(body))
        #expect(login.merged.isEmpty, "the start merged it already; the retry merges nothing")
        guard case .cart(let cart)? = try? Response.decode(frameOf(.getCart,
                answer(.getCart(session: login.session, storeUID: storeUID)))).body else { throw SetupError("no cart") }
        #expect(cart.lines.map(\.quantity) == [2], "the guest's line reached the account once")
        if case .ok = customers!.answerNow(Request(id: 1, method: .getCart(session: guest, storeUID: storeUID))) {
            Issue.record("the merged guest session is gone")
        }
    }

    /// A guest's cart merged at login into an account whose entry lives on
    /// another shard: the account's lines must not carry the guest shard's
    /// product slots, which only that shard invalidates when a price changes.
    @Test func aMergedCartKeepsNoSlotOfTheGuestsShard() throws {
        let directory = try ScratchDirectory()
        let store = try SQLiteCatalogStore(directory: directory.path)
        let catalog = try CatalogService(store: store, imageBaseURL: "http://img.test:8080")
        let options = CustomerService.Options(directory: directory.path + "/customers", shards: 2)
        let customers = try CustomerService(options, catalog: catalog, orders: store, logger: Logger(level: .error, sink: { _ in }))
        func answer(_ method: RequestMethod) throws -> [UInt8] {
            guard case .ok(_, let body) = customers.answerNow(Request(id: 1, method: method)) else {
                throw SetupError("\(method) was refused: \(customers.answerNow(Request(id: 1, method: method)))")
            }
            return body
        }
        let email = "slots@example.com"
        _ = try answer(.register(Registration(email: email, password: "correct horse", name: "S")))
        let owner = SessionKey(accountEmail: email)
        let shards = customers.shards
        // A guest session on the other shard than the account's entry.
        var guest = ""
        for _ in 0..<64 {
            guard case .openSession(let token)? = try? Response.decode(frameOf(.openSession, answer(.openSession))).body else {
                throw SetupError("no session")
            }
            if SessionKey(token: token).shard(of: shards.count) != owner.shard(of: shards.count) { guest = token; break }
        }
        try #require(!guest.isEmpty, "no guest session landed on the other shard in 64 tries")
        let storeUID = "store-spb-1"
        let uid = try #require(sample.stores.first { $0.uid == storeUID }?.departments.first?.shelves.first?.products.first?.uid)
        _ = try answer(.addItem(CartMutation(session: guest, storeUID: storeUID), productUID: uid, quantity: 2))
        let guestShard = shards[SessionKey(token: guest).shard(of: shards.count)]
        let guestLine = try #require(guestShard.currentState.sessions[SessionKey(token: guest)]?.carts[storeUID]?.lines.first)
        #expect(guestLine.slot.map(guestShard.cache.owns) == true, "the guest's line holds its shard's slot")
        _ = try answer(.login(LoginDetails(email: email, password: "correct horse", guestSession: guest)))
        let accountShard = shards[owner.shard(of: shards.count)]
        let merged = try #require(accountShard.currentState.sessions[owner]?.carts[storeUID]?.lines)
        #expect(merged.map(\.productUID) == [uid] && merged.map(\.quantity) == [2])
        #expect(merged.allSatisfy { line in line.slot.map { accountShard.cache.owns($0) } ?? true },
                "no merged line keeps a slot of the guest's shard")
    }

    /// A response frame's body (without its length prefix) around `body`.
    func frameOf(_ field: MethodField, _ body: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = []
        ResponseFrameWriter.appendOK(id: 1, field: field, body: body, to: &frame)
        return Array(frame.dropFirst(4))
    }
}
