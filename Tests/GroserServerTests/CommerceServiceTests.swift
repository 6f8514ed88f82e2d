#if canImport(Glibc)
import Glibc
#endif
import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// A fresh directory under /tmp, removed with its files when released.
final class ScratchDirectory {
    let path: String

    init() throws {
        // The one mkdtemp wrapper (GroserSystem): it reads the name while
        // the template is alive.
        do { path = try Files.makeTemporaryDirectory(prefix: "groser-commerce-tests-") } catch { throw SetupError("mkdtemp failed: \(error)") }
    }

    deinit { Self.remove(path) }

    private static func remove(_ path: String) {
        guard let dir = opendir(path) else {
            _ = unlink(path)
            return
        }
        var children: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { children.append(path + "/" + name) }
        }
        closedir(dir)
        for child in children { remove(child) }
        _ = rmdir(path)
    }
}

struct SetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `sql` on the database at `path` with the sqlite3 shell, from outside
/// the code under test; its output lines.
private func sqlite3Shell(_ path: String, _ sql: String) throws -> [String] {
    let candidates: [String] = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"]
    guard let shell = candidates.first(where: { access($0, X_OK) == 0 }) else {
        throw SetupError("no sqlite3 shell")
    }
    let quote = { (s: String) in
        "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
    guard let pipe = popen("\(shell) -batch \(quote(path)) \(quote(sql)) 2>&1", "r") else {
        throw SetupError("popen failed")
    }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, pipe)
        if n == 0 { break }
        output += buffer[0..<n]
    }
    let status = pclose(pipe)
    let lines = String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
    guard status == 0 else { throw SetupError("sqlite3 failed: \(lines.joined(separator: " "))") }
    return lines
}

/// A real SQLite store with the sample catalog and a real customer log in a
/// temporary directory: cart requests go through a customer shard (its
/// rules and batch path, each request a batch of one, durable before it
/// answers), SetProduct through the commerce service as the commit queue
/// runs it.
private final class Shop {
    let directory: ScratchDirectory
    let store: SQLiteCatalogStore
    let service: CommerceService
    let customers: CustomerService
    let catalog: CatalogService
    /// The SPB default store.
    let storeUID: String
    /// Its in-stock products, in catalog order.
    let products: [Product]
    /// A product of another city's store.
    let foreignProduct: Product

    static let root = Caller(uid: 0, gid: 0)
    static let customer = Caller(uid: 1000, gid: 1000)

    init(_ service: CommerceService = CommerceService(adminUIDs: [], imageBaseURL: imageBase), limits: CartLimits = CartLimits(),
         yearMonth: @escaping @Sendable () -> (year: Int, month: Int) = localYearMonth,
         unixTime: @escaping @Sendable () -> Int64 = wallClockSeconds) throws {
        directory = try ScratchDirectory()
        store = try SQLiteCatalogStore(directory: directory.path)
        self.service = service
        let catalog = try CatalogService(store: store, imageBaseURL: imageBase)
        self.catalog = catalog
        customers = try CustomerService(
            CustomerService.Options(directory: directory.path + "/customers", limits: limits), catalog: catalog,
            orders: store, logger: Logger(level: .error, sink: { _ in }), yearMonth: yearMonth, unixTime: unixTime)
        let spb = try #require(sample.cities.first { $0.code == "SPB" })
        storeUID = spb.defaultStoreUID
        let store = try #require(sample.stores.first { $0.uid == spb.defaultStoreUID })
        products = store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }
        let msk = try #require(sample.cities.first { $0.code == "MSK" })
        let other = try #require(sample.stores.first { $0.uid == msk.defaultStoreUID })
        foreignProduct = try #require(other.departments.first?.shelves.first?.products.first)
        #expect(products.count > 20)
    }

    var databasePath: String { store.path }

    /// What the customer log on disk holds, read as a restart would.
    func loggedState() throws -> CustomerState {
        var state = CustomerState()
        for name in try LogFile.names(in: directory.path + "/customers") where name.hasPrefix("shard-") {
            try CustomerLog.read(directory: directory.path + "/customers/" + name, into: &state)
        }
        return state
    }

    /// One request in its own write transaction (execute makes its own savepoint).
    @discardableResult
    func run(_ method: RequestMethod, as caller: Caller = Shop.customer,
             with service: CommerceService? = nil) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        let service = service ?? self.service
        if let executor = method.field?.info.executor, executor == .customerShard || executor == .accountWorkers {
            let before = try store.catalogVersion()
            let outcome = customers.answerNow(Request(id: 1, method: method), caller: caller)
            return (outcome, try store.catalogVersion() != before)
        }
        let result = try store.write { (tx) throws(StorageError) -> (outcome: CommerceOutcome, catalogChanged: Bool) in
            try service.execute(method, caller: caller, in: tx)
        }
        // As the commit queue does: the change path, which carts follow.
        if result.catalogChanged { try catalog.refresh() }
        return result
    }

    /// Reads the store through the same transaction interface.
    func look<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws -> T {
        try store.write(body)
    }

    func product(_ uid: String) throws -> ProductRecord {
        let found = try look { (tx) throws(StorageError) -> ProductRecord? in try tx.product(uid) }
        return try #require(found)
    }

    func openSession() throws -> String {
        let body = try okBody(run(.openSession).outcome, .openSession)
        guard case .openSession(let token) = try decode(.openSession, body) else { throw SetupError("not a session") }
        return token
    }

    func mutation(_ session: String, key: String = "", version: UInt64 = 0) -> CartMutation {
        CartMutation(session: session, storeUID: storeUID, idempotencyKey: key, expectedVersion: version)
    }

    /// The cart a cart method answered.
    func cart(_ method: RequestMethod, as caller: Caller = Shop.customer, sourceLocation: SourceLocation = #_sourceLocation) throws -> Cart {
        let outcome = try run(method, as: caller).outcome
        guard case .ok(let field, let body) = outcome else {
            Issue.record("expected a cart, got \(outcome)", sourceLocation: sourceLocation)
            throw SetupError("refused")
        }
        guard case .cart(let cart) = try decode(field, body) else { throw SetupError("not a cart") }
        return cart
    }

    func getCart(_ session: String, acceptPrices: Bool = false) throws -> Cart {
        try cart(.getCart(session: session, storeUID: storeUID, acceptPrices: acceptPrices))
    }

    func setProduct(_ update: ProductUpdate, as caller: Caller = Shop.root) throws -> ProductUpdateResult {
        let body = try okBody(run(.setProduct(update), as: caller).outcome, .setProduct)
        guard case .setProduct(let result) = try decode(.setProduct, body) else { throw SetupError("not a product") }
        return result
    }

    static let visa = "4111 1111 1111 1111"
    func checkout(_ session: String, version: UInt64, number: String = visa, month: UInt32 = 12, year: UInt32 = 2099,
                  cvc: String = "123", key: String = "") -> RequestMethod {
        .checkout(CheckoutDetails(
            session: session, storeUID: storeUID, expectedVersion: version, deliveryAddress: "Невский пр., 1",
            card: PaymentCard(number: number, expiryMonth: month, expiryYear: year, cvc: cvc, holderName: "IVAN PETROV"),
            idempotencyKey: key))
    }

    func orders(_ session: String) throws -> [Order] {
        try look { (tx) throws(StorageError) -> [Order] in try tx.orders(session: SessionKey(token: session)) }
    }
}

/// The body of an OK outcome, after checking its response field.
private func okBody(_ outcome: CommerceOutcome, _ field: MethodField,
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    guard case .ok(let got, let body) = outcome else {
        Issue.record("expected \(field.methodName) to succeed, got \(outcome)", sourceLocation: sourceLocation)
        throw SetupError("refused")
    }
    #expect(got == field, sourceLocation: sourceLocation)
    return body
}

/// Checks the outcome is the refusal `code`, with a message that says why.
private func expectRefused(_ result: (outcome: CommerceOutcome, catalogChanged: Bool), _ code: StatusCode,
                           sourceLocation: SourceLocation = #_sourceLocation) {
    guard case .failed(let status) = result.outcome else {
        Issue.record("expected \(code), got \(result.outcome)", sourceLocation: sourceLocation)
        return
    }
    #expect(status.code == code, "\(status)", sourceLocation: sourceLocation)
    #expect(!status.message.isEmpty, sourceLocation: sourceLocation)
    #expect(!result.catalogChanged, "a refusal changes no catalog", sourceLocation: sourceLocation)
}

@Suite("commerce service on a real store")
struct CommerceServiceTests {
    // MARK: SetProduct: who may

    @Test("a customer cannot change the catalog, and nothing changes", arguments: [
        Labeled("ordinary uid", Caller(uid: 1000, gid: 1000)),
        Labeled("uid without gid", Caller(uid: 1000)),
        Labeled("no credentials at all", Caller(uid: nil, gid: nil)),
        Labeled("root's group but not root", Caller(uid: 1000, gid: 0)),
        Labeled("uid 1 (daemon)", Caller(uid: 1, gid: 1)),
    ])
    func customersCannotSetProducts(caller: Labeled<Caller>) throws {
        let shop = try Shop(CommerceService(adminUIDs: [500], imageBaseURL: imageBase))
        let p = shop.products[0]
        let before = try shop.store.catalogVersion()
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: 1, stock: 0)), as: caller.value),
                      .permissionDenied)
        let now = try shop.product(p.uid)
        #expect(now.price == p.price && now.stock > 0)
        #expect(try shop.store.catalogVersion() == before)
    }

    @Test("root and the configured admin uids may change the catalog", arguments: [
        Labeled("root", Caller(uid: 0)),
        Labeled("root, any gid", Caller(uid: 0, gid: 1234)),
        Labeled("an admin uid", Caller(uid: 500, gid: 500)),
        Labeled("another admin uid", Caller(uid: 501)),
    ])
    func adminsMaySetProducts(caller: Labeled<Caller>) throws {
        let shop = try Shop(CommerceService(adminUIDs: [500, 501], imageBaseURL: imageBase))
        let p = shop.products[0]
        let result = try shop.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: p.price.minorUnits + 100), as: caller.value)
        #expect(result.product.price.minorUnits == p.price.minorUnits + 100)
        #expect(try shop.product(p.uid).price.minorUnits == p.price.minorUnits + 100)
    }

    @Test("a member of the admin group may change the catalog; others may not")
    func adminGroup() throws {
        var service = CommerceService(adminUIDs: [], adminGroup: 4242, imageBaseURL: imageBase)
        // Membership as the system would answer it: uid 1001 (primary gid 1001) is in group 4242.
        service.isMember = { uid, gid, group in uid == 1001 && gid == 1001 && group == 4242 }
        let shop = try Shop(service)
        let p = shop.products[1]
        let update = ProductUpdate(productUID: p.uid, stock: 7)
        let result = try shop.setProduct(update, as: Caller(uid: 1001, gid: 1001))
        #expect(result.stock == 7)
        expectRefused(try shop.run(.setProduct(update), as: Caller(uid: 1002, gid: 1002)), .permissionDenied)
        expectRefused(try shop.run(.setProduct(update), as: Caller(uid: nil, gid: 4242)), .permissionDenied)

        // Without an admin group, membership is never asked.
        var noGroup = CommerceService(adminUIDs: [], imageBaseURL: imageBase)
        noGroup.isMember = { _, _, _ in true }
        expectRefused(try shop.run(.setProduct(update), as: Caller(uid: 1001, gid: 1001), with: noGroup), .permissionDenied)

        // The closure decides: one that says yes to everyone lets everyone with a uid in.
        var everyone = CommerceService(adminUIDs: [], adminGroup: 4242, imageBaseURL: imageBase)
        everyone.isMember = { _, _, _ in true }
        _ = try okBody(try shop.run(.setProduct(update), as: Caller(uid: 1002), with: everyone).outcome, .setProduct)
    }

    // MARK: SetProduct: what

    @Test("SetProduct refuses an update that says nothing, a negative price, or an unknown product")
    func setProductRefusals() throws {
        let shop = try Shop()
        let p = shop.products[2]
        let before = try shop.store.catalogVersion()
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: p.uid)), as: Shop.root), .invalidArgument)
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: -1)), as: Shop.root), .invalidArgument)
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: Int64.min, stock: 3)), as: Shop.root),
                      .invalidArgument)
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: "prd-nope", priceMinorUnits: 100)), as: Shop.root), .notFound)
        expectRefused(try shop.run(.setProduct(ProductUpdate(productUID: "", stock: 1)), as: Shop.root), .notFound)
        let now = try shop.product(p.uid)
        #expect(now.price == p.price && now.stock == 100, "a refused update changes nothing")
        #expect(try shop.store.catalogVersion() == before)
    }

    @Test("SetProduct changes the catalog: the answer, the stored row and the version agree")
    func setProductChangesTheCatalog() throws {
        let shop = try Shop()
        let p = shop.products[3]
        let before = try shop.store.catalogVersion()

        let result = try shop.run(.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: 0)), as: Shop.root)
        #expect(result.catalogChanged)
        guard case .setProduct(let price) = try decode(.setProduct, try okBody(result.outcome, .setProduct)) else {
            Issue.record("not a SetProduct body"); return
        }
        #expect(price.catalogVersion == before + 1)
        #expect(try shop.store.catalogVersion() == before + 1)
        #expect(price.product.uid == p.uid && price.product.name == p.name)
        #expect(price.product.price == Money(minorUnits: 0, currency: p.price.currency), "a price of zero is allowed")
        #expect(price.stock == 100, "stock is kept when only the price is set")
        #expect(price.product.imageURL == imageBase + p.imageURL, "the answer's image URL is absolute, as the catalog serves it")

        let stock = try shop.setProduct(ProductUpdate(productUID: p.uid, stock: 0))
        #expect(stock.catalogVersion == before + 2)
        #expect(stock.stock == 0 && stock.product.outOfStock)
        #expect(stock.product.price.minorUnits == 0, "the price is kept when only the stock is set")

        let both = try shop.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: 4_990, stock: 12))
        #expect(both.stock == 12 && !both.product.outOfStock && both.product.price.minorUnits == 4_990)
        #expect(try shop.store.catalogVersion() == before + 3)
        let loaded = try shop.store.loadCatalog()
        #expect(loaded.version == before + 3)
        let served = loaded.catalog.stores.flatMap(\.departments).flatMap(\.shelves).flatMap(\.products).first { $0.uid == p.uid }
        #expect(served?.price.minorUnits == 4_990 && served?.outOfStock == false)
    }

    // MARK: Totals

    @Test("a total too large for 64 bits is refused, not a crash, and changes nothing")
    func totalsOverflow() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let big = shop.products[4], small = shop.products[5]
        _ = try shop.setProduct(ProductUpdate(productUID: big.uid, priceMinorUnits: Int64.max / 2))

        expectRefused(try shop.run(.addItem(shop.mutation(s), productUID: big.uid, quantity: 3)), .failedPrecondition)
        #expect(try shop.getCart(s).lines.isEmpty, "the refused add left no line")
        #expect(try shop.getCart(s).version == 0)

        // Two units fit exactly; one more unit of anything overflows the sum.
        let two = try shop.cart(.addItem(shop.mutation(s), productUID: big.uid, quantity: 2))
        #expect(two.subtotal.minorUnits == (Int64.max / 2) * 2)
        expectRefused(try shop.run(.addItem(shop.mutation(s), productUID: small.uid, quantity: 1)), .failedPrecondition)
        expectRefused(try shop.run(.addItem(shop.mutation(s), productUID: big.uid, quantity: 1)), .failedPrecondition)
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: big.uid, quantity: 3)), .failedPrecondition)
        let after = try shop.getCart(s)
        #expect(after.lines.map(\.productUID) == [big.uid] && after.lines[0].quantity == 2 && after.version == two.version,
                "refused changes leave the cart as it was")
    }

    @Test("a price raised past what a cart can total refuses GetCart, and removing the line recovers it")
    func overflowAfterAPriceChange() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let p = shop.products[6]
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: p.uid, quantity: 3))
        _ = try shop.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: Int64.max / 2))
        expectRefused(try shop.run(.getCart(session: s, storeUID: shop.storeUID)), .failedPrecondition)
        expectRefused(try shop.run(shop.checkout(s, version: c.version)), .failedPrecondition)
        #expect(try shop.orders(s).isEmpty)
        let fixed = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 1))
        #expect(fixed.subtotal.minorUnits == Int64.max / 2)
        #expect(try shop.cart(.removeItem(shop.mutation(s), productUID: p.uid)).lines.isEmpty)
    }

    // MARK: GetCart

    @Test("GetCart shows a changed price and changes nothing; GetCart with accept_prices makes it the price the customer saw")
    func onlyAnAcceptingGetCartAcknowledgesPriceChanges() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let p = shop.products[7], q = shop.products[8]
        _ = try shop.cart(.addItem(shop.mutation(s), productUID: p.uid, quantity: 2))
        let added = try shop.cart(.addItem(shop.mutation(s), productUID: q.uid, quantity: 1))
        #expect(added.lines.allSatisfy { !$0.priceChanged && $0.previousPrice == nil })

        let unchanged = try shop.getCart(s)
        #expect(unchanged.version == added.version, "looking at an unchanged cart changes nothing")

        let raised = p.price.minorUnits + 1_250
        _ = try shop.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: raised))
        let looked = try shop.getCart(s)
        #expect(looked.version == added.version, "a read changes nothing, even when it shows a changed price")
        #expect(looked.lines[0].priceChanged && looked.lines[0].unitPrice.minorUnits == raised)
        #expect(try shop.getCart(s) == looked, "looking again shows the same, still marked")
        expectRefused(try shop.run(shop.checkout(s, version: looked.version)), .failedPrecondition)

        let first = try shop.getCart(s, acceptPrices: true)
        #expect(first.version == added.version + 1)
        #expect(first.lines[0].priceChanged && first.lines[0].unitPrice.minorUnits == raised)
        #expect(first.lines[0].previousPrice == p.price)
        #expect(first.lines[0].lineTotal.minorUnits == raised * 2)
        #expect(!first.lines[1].priceChanged && first.lines[1].previousPrice == nil, "only the changed line is marked")
        #expect(first.subtotal.minorUnits == raised * 2 + q.price.minorUnits)

        let second = try shop.getCart(s)
        #expect(second.version == first.version, "the change was accepted; showing it again is no change")
        #expect(second.lines.allSatisfy { !$0.priceChanged && $0.previousPrice == nil })
        #expect(second.subtotal == first.subtotal)
        #expect(try shop.getCart(s, acceptPrices: true).version == second.version, "nothing left to accept: no new version")

        // The confirmed cart checks out at the new price.
        guard case .checkout(let order) = try decode(.checkout, try okBody(try shop.run(shop.checkout(s, version: second.version)).outcome, .checkout)) else {
            Issue.record("not an order"); return
        }
        #expect(order.total.minorUnits == raised * 2 + q.price.minorUnits)
    }

    @Test("GetCart of a store never used is empty, version 0, and creates nothing")
    func emptyCart() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let c = try shop.getCart(s)
        #expect(c.lines.isEmpty && c.version == 0 && c.itemCount == 0 && c.subtotal.minorUnits == 0)
        #expect(c.currency == "RUB" && c.storeUID == shop.storeUID)
        #expect(try shop.loggedState().sessions[SessionKey(token: s)] == nil, "nothing was stored")
        expectRefused(try shop.run(.getCart(session: s, storeUID: "store-nope")), .notFound)
        expectRefused(try shop.run(.getCart(session: "", storeUID: shop.storeUID)), .unauthenticated)
        expectRefused(try shop.run(.getCart(session: String(repeating: "f", count: 32), storeUID: shop.storeUID)), .unauthenticated)
        // A token that shares the stored one's first 8 characters is still not that session.
        expectRefused(try shop.run(.getCart(session: String(s.prefix(8)) + String(repeating: "0", count: 24), storeUID: shop.storeUID)),
                      .unauthenticated)
    }

    // MARK: SetQuantity

    @Test("SetQuantity creates a line, raises it while in stock, and may always lower it")
    func setQuantity() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let p = shop.products[9]

        let created = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 4))
        #expect(created.lines.count == 1 && created.lines[0].productUID == p.uid && created.lines[0].quantity == 4)
        #expect(created.lines[0].unitPrice == p.price && created.version == 1)

        let raised = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 6))
        #expect(raised.lines[0].quantity == 6 && raised.version == 2)

        _ = try shop.setProduct(ProductUpdate(productUID: p.uid, stock: 0))
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 7)), .failedPrecondition)
        #expect(try shop.getCart(s).lines[0].quantity == 6, "the refused raise changed nothing")

        let lowered = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 2))
        #expect(lowered.lines[0].quantity == 2 && lowered.lines[0].outOfStock, "lowering an out-of-stock line is allowed")
        let same = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 2))
        #expect(same.lines[0].quantity == 2, "setting the same quantity is not a raise")
        let removed = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 0))
        #expect(removed.lines.isEmpty, "0 removes the line, in stock or not")

        // No line yet: an out-of-stock product cannot start one, and 0 is a no-op.
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 1)), .failedPrecondition)
        let noop = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 0))
        #expect(noop.lines.isEmpty)
    }

    @Test("SetQuantity refuses what AddItem refuses")
    func setQuantityRefusals() throws {
        let shop = try Shop(limits: CartLimits(maximumQuantity: 10))
        let s = try shop.openSession()
        let p = shop.products[10]
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 11)), .invalidArgument)
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: "prd-nope", quantity: 1)), .invalidArgument)
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: "", quantity: 1)), .invalidArgument)
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: shop.foreignProduct.uid, quantity: 1)), .invalidArgument)
        let ten = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 10))
        #expect(ten.lines[0].quantity == 10, "the maximum itself is allowed")
        expectRefused(try shop.run(.setQuantity(shop.mutation(s, version: ten.version + 1), productUID: p.uid, quantity: 1)), .aborted)
        #expect(try shop.getCart(s) == ten)
    }

    @Test("removing a product: an empty uid is refused alike; one not in the cart is NOT_FOUND for RemoveItem, a no-op for SetQuantity 0")
    func removalOfProductsNotInTheCart() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        expectRefused(try shop.run(.removeItem(shop.mutation(s), productUID: "")), .invalidArgument)
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: "", quantity: 0)), .invalidArgument)
        for uid in ["prd-nope", shop.foreignProduct.uid, shop.products[0].uid] {
            expectRefused(try shop.run(.removeItem(shop.mutation(s), productUID: uid)), .notFound)
            #expect(try shop.cart(.setQuantity(shop.mutation(s), productUID: uid, quantity: 0)).lines.isEmpty)
        }
    }

    @Test("a cart holds at most the configured number of lines")
    func lineLimit() throws {
        let shop = try Shop(limits: CartLimits(maximumLines: 3))
        let s = try shop.openSession()
        for p in shop.products.prefix(3) { _ = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 1)) }
        expectRefused(try shop.run(.setQuantity(shop.mutation(s), productUID: shop.products[3].uid, quantity: 1)), .failedPrecondition)
        expectRefused(try shop.run(.addItem(shop.mutation(s), productUID: shop.products[3].uid, quantity: 1)), .failedPrecondition)
        let full = try shop.cart(.addItem(shop.mutation(s), productUID: shop.products[0].uid, quantity: 1))
        #expect(full.lines.count == 3 && full.lines[0].quantity == 2, "an existing line still grows in a full cart")
    }

    // MARK: Checkout

    @Test("a checkout retried with its idempotency key answers the same bytes and charges once")
    func checkoutReplay() throws {
        let shop = try Shop(unixTime: { 1_800_000_000 })
        let s = try shop.openSession()
        let p = shop.products[11]
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: p.uid, quantity: 3))

        let first = try shop.run(shop.checkout(s, version: c.version, key: "pay-1"))
        let body = try okBody(first.outcome, .checkout)
        let retry = try shop.run(shop.checkout(s, version: c.version, key: "pay-1"))
        #expect(retry.outcome == .ok(.checkout, body), "the retry answers the first answer's exact bytes")
        #expect(!retry.catalogChanged)

        guard case .checkout(let order) = try decode(.checkout, body) else { Issue.record("not an order"); return }
        #expect(order.total.minorUnits == p.price.minorUnits * 3)
        #expect(order.cardBrand == "Visa" && order.cardLast4 == "1111")
        #expect(order.createdAtUnix == 1_800_000_000, "the order is stamped by the injected clock")
        #expect(try shop.orders(s).map(\.number) == [order.number], "one order")
        #expect(try shop.product(p.uid).stock == 97, "stock taken once")

        // The same key for a different request is refused, not replayed.
        expectRefused(try shop.run(shop.checkout(s, version: c.version, number: "5555 5555 5555 4444", key: "pay-1")),
                      .failedPrecondition)
        // Without a key, the retry is a new checkout of an empty cart.
        expectRefused(try shop.run(shop.checkout(s, version: c.version)), .failedPrecondition)
        #expect(try shop.orders(s).count == 1)
    }

    @Test("a refused checkout does not burn its idempotency key")
    func refusedCheckoutKeepsTheKey() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: shop.products[12].uid, quantity: 1))
        expectRefused(try shop.run(shop.checkout(s, version: c.version, cvc: "12", key: "pay-1")), .invalidArgument)
        expectRefused(try shop.run(shop.checkout(s, version: c.version + 1, key: "pay-1")), .aborted)
        _ = try okBody(try shop.run(shop.checkout(s, version: c.version, key: "pay-1")).outcome, .checkout)
        #expect(try shop.orders(s).count == 1)
    }

    @Test("the stored idempotency record holds no card number and no CVC")
    func idempotencyRecordHasNoCardNumber() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let number = "4000 0566 5566 5556", digits = "4000056655665556", cvc = "7391"
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: shop.products[13].uid, quantity: 1))
        let refusedNumber = "4000 0566 5566 5557"
        expectRefused(try shop.run(shop.checkout(s, version: c.version, number: refusedNumber, cvc: cvc, key: "pay-x")), .invalidArgument)
        _ = try okBody(try shop.run(shop.checkout(s, version: c.version, number: number, cvc: cvc, key: "pay-1")).outcome, .checkout)

        // From outside: the rows as the sqlite3 shell sees them.
        let rows = try sqlite3Shell(shop.databasePath, "SELECT key, fingerprint FROM idempotency")
        #expect(rows.count == 1 && rows[0].hasPrefix("pay-1|"), "\(rows)")
        for row in rows {
            for needle in [number, digits, refusedNumber, "4000056655665557", "400005", "0566 5566", cvc] {
                #expect(!row.contains(needle), "\(needle) is in the stored fingerprint: \(row)")
            }
            #expect(row.contains("5556"), "the fingerprint still tells cards apart by their last four digits")
        }
        // The stored answer (the order) has the last four digits only.
        let answer = try #require(try shop.look { (tx) throws(StorageError) -> IdempotentAnswer? in
            try tx.idempotentAnswer(session: SessionKey(token: s), key: "pay-1")
        })
        let stored = String(decoding: answer.body, as: UTF8.self)
        #expect(!stored.contains(digits) && !stored.contains(number) && !stored.contains(cvc))
        // And nowhere in the database's text.
        let dump = try sqlite3Shell(shop.databasePath, ".dump").joined(separator: "\n")
        for needle in [number, digits, refusedNumber, "4000056655665557"] {
            #expect(!dump.contains(needle), "\(needle) is in the database")
        }
    }

    @Test("an expired card is refused by the service's clock, and nothing is bought")
    func expiredCardByTheInjectedClock() throws {
        let shop = try Shop(yearMonth: { (2031, 1) })
        let s = try shop.openSession()
        let p = shop.products[14]
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: p.uid, quantity: 1))
        expectRefused(try shop.run(shop.checkout(s, version: c.version, month: 12, year: 2030)), .invalidArgument)
        expectRefused(try shop.run(shop.checkout(s, version: c.version, month: 12, year: 30)), .invalidArgument)
        #expect(try shop.orders(s).isEmpty)
        #expect(try shop.getCart(s).lines.count == 1, "the cart is kept")
        #expect(try shop.product(p.uid).stock == 100)
        // The card's own month, by the same clock, is fine.
        _ = try okBody(try shop.run(shop.checkout(s, version: c.version, month: 1, year: 31)).outcome, .checkout)
    }

    @Test("checkout that sells the last unit changes the catalog; one that doesn't, doesn't")
    func checkoutCatalogChange() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let p = shop.products[15], q = shop.products[16]
        _ = try shop.setProduct(ProductUpdate(productUID: p.uid, stock: 2))
        let before = try shop.store.catalogVersion()

        let c1 = try shop.cart(.addItem(shop.mutation(s), productUID: q.uid, quantity: 1))
        let plain = try shop.run(shop.checkout(s, version: c1.version))
        _ = try okBody(plain.outcome, .checkout)
        #expect(try !plain.catalogChanged && shop.store.catalogVersion() == before)

        let c2 = try shop.cart(.addItem(shop.mutation(s), productUID: p.uid, quantity: 3))
        expectRefused(try shop.run(shop.checkout(s, version: c2.version)), .failedPrecondition)  // only 2 left
        let c3 = try shop.cart(.setQuantity(shop.mutation(s), productUID: p.uid, quantity: 2))
        let last = try shop.run(shop.checkout(s, version: c3.version))
        _ = try okBody(last.outcome, .checkout)
        #expect(try last.catalogChanged && shop.store.catalogVersion() == before + 1)
        #expect(try shop.product(p.uid).stock == 0)
        #expect(try shop.orders(s).count == 2)
    }

    @Test("checkout refuses what the customer did not confirm")
    func checkoutRefusals() throws {
        let shop = try Shop()
        let s = try shop.openSession()
        let c = try shop.cart(.addItem(shop.mutation(s), productUID: shop.products[17].uid, quantity: 1))
        expectRefused(try shop.run(shop.checkout(s, version: 0)), .invalidArgument)
        var blank = CheckoutDetails(session: s, storeUID: shop.storeUID, expectedVersion: c.version, deliveryAddress: " \t\n ",
                                    card: PaymentCard(number: Shop.visa, expiryMonth: 12, expiryYear: 2099, cvc: "123", holderName: "X"))
        expectRefused(try shop.run(.checkout(blank)), .invalidArgument)
        blank.storeUID = "store-nope"
        blank.deliveryAddress = "Somewhere"
        expectRefused(try shop.run(.checkout(blank)), .notFound)
        expectRefused(try shop.run(shop.checkout("", version: c.version)), .unauthenticated)
        #expect(try shop.orders(s).isEmpty && shop.getCart(s) == c)
    }

    // MARK: Sessions

    @Test("OpenSession answers a fresh 64-hex-digit token, stored at its first change, that opens carts")
    func openSession() throws {
        let shop = try Shop()
        var seen: Set<String> = []
        for caller in [Caller(uid: nil), Shop.customer, Shop.root] {
            let result = try shop.run(.openSession, as: caller)
            #expect(!result.catalogChanged)
            guard case .openSession(let token) = try decode(.openSession, try okBody(result.outcome, .openSession)) else {
                Issue.record("not a session"); return
            }
            #expect(token.count == 64, "\(token)")
            #expect(token.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) },
                    "\(token) is lower-case hex")
            #expect(seen.insert(token).inserted, "tokens differ")
            #expect(try shop.getCart(token).lines.isEmpty)
            #expect(try shop.loggedState().sessions[SessionKey(token: token)] == nil, "nothing stores a session that holds nothing")
        }
    }

    @Test("sessions do not see each other's carts or orders")
    func sessionsAreSeparate() throws {
        let shop = try Shop()
        let a = try shop.openSession(), b = try shop.openSession()
        let c = try shop.cart(.addItem(shop.mutation(a), productUID: shop.products[18].uid, quantity: 1))
        #expect(try shop.getCart(b).lines.isEmpty)
        _ = try okBody(try shop.run(shop.checkout(a, version: c.version, key: "k")).outcome, .checkout)
        #expect(try shop.orders(b).isEmpty)
        guard case .ok(.listOrders, let body) = try shop.run(.listOrders(session: a)).outcome,
              case .listOrders(let orders) = try decode(.listOrders, body) else {
            Issue.record("ListOrders failed"); return
        }
        #expect(orders.count == 1)
        // The same key in another session is that session's own key.
        let cb = try shop.cart(.addItem(shop.mutation(b), productUID: shop.products[18].uid, quantity: 1))
        _ = try okBody(try shop.run(shop.checkout(b, version: cb.version, key: "k")).outcome, .checkout)
        #expect(try shop.orders(b).count == 1)
        expectRefused(try shop.run(.listOrders(session: "")), .unauthenticated)
    }

    @Test("methods the service does not answer are refused as unimplemented")
    func otherMethods() throws {
        let shop = try Shop()
        for method in [RequestMethod.serverInfo, .listCities, .unknown] {
            #expect(method.field?.info.isDeferred != true)
            expectRefused(try shop.run(method), .unimplemented)
        }
        #expect(RequestMethod.openSession.field?.info.isDeferred == true && RequestMethod.setProduct(ProductUpdate(productUID: "")).field?.info.isDeferred == true)
    }
}
