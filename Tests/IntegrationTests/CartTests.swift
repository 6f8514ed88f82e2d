import Foundation
import GroserClient
import GroserSystem
import Testing

/// Carts and checkout against a real groserd and its real SQLite file.
@Suite("carts and checkout", .serialized)
struct CartTests {
    let daemon: Daemon
    let client: GroserClient
    let storeUID: String
    /// In-stock products of the SPB default store, by shelf order.
    let products: [Product]

    init() throws {
        daemon = try Daemon(extraArguments: ["--max-quantity", "500"])
        client = daemon.client(timeout: 10)
        let store = try client.store(.cityCode("SPB"), includeProducts: true)
        storeUID = store.store.uid
        products = store.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }
    }

    func session() throws -> String { try client.openSession() }
    func cart(_ session: String, key: String = "", version: UInt64 = 0) -> CartMutation {
        CartMutation(session: session, storeUID: storeUID, idempotencyKey: key, expectedVersion: version)
    }

    func expectStatus(_ code: StatusCode, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            try body()
            Issue.record("expected \(code)", sourceLocation: sourceLocation)
        } catch let error as GroserError {
            #expect(error.status?.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.status?.message.isEmpty == false, sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func sessionsAreUnguessableAndCartsBelongToSessionAndStore() throws {
        let a = try session(), b = try session()
        #expect(a.count == 64 && a.allSatisfy(\.isHexDigit) && a != b)
        _ = try client.addItem(cart(a), productUID: products[0].uid)
        #expect(try client.cart(session: b, storeUID: storeUID).lines.isEmpty, "one session cannot see another's cart")
        let msk = try client.store(.cityCode("MSK")).store.uid
        #expect(try client.cart(session: a, storeUID: msk).lines.isEmpty, "another city's store has its own cart")
        #expect(try client.cart(session: a, storeUID: storeUID).lines.count == 1, "and switching back keeps this one")
        expectStatus(.unauthenticated) { _ = try client.cart(session: String(repeating: "0", count: 32), storeUID: storeUID) }
    }

    @Test func addingAProductTwiceKeepsOneLine() throws {
        let s = try session()
        _ = try client.addItem(cart(s), productUID: products[0].uid, quantity: 2)
        _ = try client.addItem(cart(s), productUID: products[1].uid)
        let c = try client.addItem(cart(s), productUID: products[0].uid, quantity: 3)
        #expect(c.lines.map(\.productUID) == [products[0].uid, products[1].uid])
        #expect(c.lines[0].quantity == 5)
        #expect(c.itemCount == 6)
        #expect(c.lines[0].lineTotal.minorUnits == products[0].price.minorUnits * 5)
        #expect(c.subtotal.minorUnits == products[0].price.minorUnits * 5 + products[1].price.minorUnits)
        #expect(c.version == 3)
        let set = try client.setQuantity(cart(s), productUID: products[0].uid, quantity: 0)
        #expect(set.lines.map(\.productUID) == [products[1].uid], "quantity 0 removes the line")
        let removed = try client.removeItem(cart(s), productUID: products[1].uid)
        #expect(removed.lines.isEmpty)
        expectStatus(.notFound) { _ = try client.removeItem(cart(s), productUID: products[1].uid) }
        _ = try client.addItem(cart(s), productUID: products[2].uid)
        #expect(try client.clearCart(cart(s)).lines.isEmpty)
    }

    @Test func parallelAddsFromTenConnectionsSumExactly() throws {
        let s = try session()
        let product = products[3].uid
        let failures = Mutex2()
        let path = daemon.socketPath
        let mutation = cart(s)
        DispatchQueue.concurrentPerform(iterations: 10) { _ in
            let own = GroserClient(socketPath: path, timeout: 10)  // its own connection
            for _ in 0..<10 {
                do { _ = try own.addItem(mutation, productUID: product) } catch { failures.add("\(error)") }
            }
        }
        #expect(failures.values.isEmpty)
        let c = try client.cart(session: s, storeUID: storeUID)
        #expect(c.lines.count == 1)
        #expect(c.lines.first?.quantity == 100)
        #expect(c.version == 100)
    }

    @Test func aRetryWithTheSameKeyChangesNothing() throws {
        let s = try session()
        let first = try client.addItem(cart(s, key: "k-1"), productUID: products[0].uid, quantity: 2)
        let retry = try client.addItem(cart(s, key: "k-1"), productUID: products[0].uid, quantity: 2)
        #expect(retry == first)
        let now = try client.cart(session: s, storeUID: storeUID)
        #expect(now.lines.first?.quantity == 2 && now.version == first.version)
        expectStatus(.failedPrecondition) { _ = try client.addItem(cart(s, key: "k-1"), productUID: products[0].uid, quantity: 3) }
        #expect(try client.cart(session: s, storeUID: storeUID).lines.first?.quantity == 2)
    }

    @Test func aStaleVersionIsAbortedAndChangesNothing() throws {
        let s = try session()
        let v1 = try client.addItem(cart(s), productUID: products[0].uid)
        let v2 = try client.addItem(cart(s, version: v1.version), productUID: products[1].uid)
        #expect(v2.version == v1.version + 1)
        expectStatus(.aborted) { _ = try client.setQuantity(cart(s, version: v1.version), productUID: products[0].uid, quantity: 9) }
        #expect(try client.cart(session: s, storeUID: storeUID) == v2)
    }

    @Test func invalidChangesAreRefusedWithAClearStatus() throws {
        let s = try session()
        expectStatus(.invalidArgument) { _ = try client.addItem(cart(s), productUID: products[0].uid, quantity: 0) }
        expectStatus(.invalidArgument) { _ = try client.addItem(cart(s), productUID: products[0].uid, quantity: 501) }
        expectStatus(.invalidArgument) { _ = try client.addItem(cart(s), productUID: "prd-nope") }
        let msk = try client.store(.cityCode("MSK"), includeProducts: true).store
        let foreign = try #require(msk.departments.first?.shelves.first?.products.first)
        expectStatus(.invalidArgument) { _ = try client.addItem(cart(s), productUID: foreign.uid) }
        let all = try client.store(.storeUID(storeUID), includeProducts: true).store.departments.flatMap(\.shelves).flatMap(\.products)
        let gone = try #require(all.first { $0.outOfStock })
        expectStatus(.failedPrecondition) { _ = try client.addItem(cart(s), productUID: gone.uid) }
        _ = try client.addItem(cart(s), productUID: products[0].uid, quantity: 500)
        expectStatus(.failedPrecondition) { _ = try client.addItem(cart(s), productUID: products[0].uid) }
        expectStatus(.notFound) { _ = try client.addItem(CartMutation(session: s, storeUID: "store-nope"), productUID: products[0].uid) }
        #expect(try client.cart(session: s, storeUID: storeUID).itemCount == 500, "refusals change nothing")
    }

    @Test func aCartHoldsAtMost200Lines() throws {
        let s = try session()
        #expect(products.count > 200)
        for p in products.prefix(200) { _ = try client.addItem(cart(s), productUID: p.uid) }
        expectStatus(.failedPrecondition) { _ = try client.addItem(cart(s), productUID: products[200].uid) }
        #expect(try client.cart(session: s, storeUID: storeUID).lines.count == 200)
    }

    static let visa = "4111 1111 1111 1111"
    func details(_ s: String, version: UInt64, number: String = visa, month: UInt32 = 12, year: UInt32 = 2099,
                 cvc: String = "123", key: String = "") -> CheckoutDetails {
        CheckoutDetails(session: s, storeUID: storeUID, expectedVersion: version, deliveryAddress: "Невский пр., 1",
                        card: PaymentCard(number: number, expiryMonth: month, expiryYear: year, cvc: cvc, holderName: "IVAN PETROV"),
                        idempotencyKey: key)
    }

    @Test func checkoutPlacesAnOrderAndEmptiesTheCart() throws {
        let s = try session()
        _ = try client.addItem(cart(s), productUID: products[5].uid, quantity: 2)
        let c = try client.addItem(cart(s), productUID: products[6].uid)
        let order = try client.checkout(details(s, version: c.version))
        #expect(order.number.hasPrefix("G-"))
        #expect(order.total == c.subtotal)
        #expect(order.cardBrand == "Visa" && order.cardLast4 == "1111")
        #expect(order.cityCode == "SPB" && order.lines.count == 2)
        #expect(try client.cart(session: s, storeUID: storeUID).lines.isEmpty)
        #expect(try client.orders(session: s).map(\.number) == [order.number])
        expectStatus(.failedPrecondition) { _ = try client.checkout(details(s, version: c.version + 1)) }  // empty now
    }

    @Test func badCardsAreRefused() throws {
        let s = try session()
        let c = try client.addItem(cart(s), productUID: products[7].uid)
        let refused: [CheckoutDetails] = [
            details(s, version: c.version, number: "4111 1111 1111 1112"),          // Luhn
            details(s, version: c.version, number: "4111-1111-111"),                // too short
            details(s, version: c.version, number: "4111 1111 1111 111a"),          // not digits
            details(s, version: c.version, month: 13),
            details(s, version: c.version, month: 1, year: 2020),                   // expired
            details(s, version: c.version, year: 123),                              // 3-digit year
            details(s, version: c.version, cvc: "12"),
            details(s, version: c.version, cvc: "12a"),
        ]
        for d in refused { expectStatus(.invalidArgument) { _ = try client.checkout(d) } }
        expectStatus(.aborted) { _ = try client.checkout(details(s, version: c.version + 5)) }
        #expect(try client.cart(session: s, storeUID: storeUID).lines.count == 1, "nothing was bought")
        // Valid through the last day of its month: this month is still fine, in two digits too.
        let now = localYearMonth()
        _ = try client.checkout(details(s, version: c.version, number: "5555 5555 5555 4444", month: UInt32(now.month), year: UInt32(now.year % 100)))
    }

    @Test func aChangedPriceIsNeverChargedSilently() throws {
        let s = try session()
        let p = products[8]
        let c = try client.addItem(cart(s), productUID: p.uid, quantity: 2)
        let raised = p.price.minorUnits + 1000
        _ = try client.setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: raised))
        do {
            _ = try client.checkout(details(s, version: c.version))
            Issue.record("checkout charged a changed price")
        } catch {
            #expect(error.status?.code == .failedPrecondition)
            #expect(error.status?.message.contains(p.name) == true, "the refusal names the line")
        }
        let looked = try client.cart(session: s, storeUID: storeUID)
        #expect(looked.lines[0].priceChanged && looked.version == c.version, "looking changes nothing")
        let shown = try client.cart(session: s, storeUID: storeUID, acceptPrices: true)
        #expect(shown.lines[0].priceChanged && shown.lines[0].unitPrice.minorUnits == raised)
        #expect(shown.lines[0].previousPrice?.minorUnits == p.price.minorUnits)
        #expect(shown.version == c.version + 1)
        let order = try client.checkout(details(s, version: shown.version))
        #expect(order.total.minorUnits == raised * 2)
        #expect(try client.store(.storeUID(storeUID), includeProducts: true).store.departments
            .flatMap(\.shelves).flatMap(\.products).first { $0.uid == p.uid }?.price.minorUnits == raised,
            "the catalog serves the new price")
    }

    @Test func theLastUnitIsSoldOnce() throws {
        let p = products[9]
        _ = try client.setProduct(ProductUpdate(productUID: p.uid, stock: 1))
        let sessions = try (0..<2).map { _ in try session() }
        var versions: [UInt64] = []
        for s in sessions { versions.append(try client.addItem(cart(s), productUID: p.uid).version) }
        let results = Mutex2()
        let path = daemon.socketPath
        let ds = zip(sessions, versions).map { details($0.0, version: $0.1) }
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            do {
                let order = try GroserClient(socketPath: path, timeout: 10).checkout(ds[i])
                results.add("ok \(order.number)")
            } catch let error as GroserError {
                results.add("\(error.status?.code.description ?? "\(error)")")
            } catch { results.add("\(error)") }
        }
        #expect(results.values.filter { $0.hasPrefix("ok") }.count == 1, "\(results.values)")
        #expect(results.values.contains("FAILED_PRECONDITION"))
        let now = try client.store(.storeUID(storeUID), includeProducts: true).store.departments
            .flatMap(\.shelves).flatMap(\.products).first { $0.uid == p.uid }
        #expect(now?.outOfStock == true, "the catalog shows it sold out")
    }

    @Test func aRetriedCheckoutGivesOneOrder() throws {
        let s = try session()
        let c = try client.addItem(cart(s), productUID: products[10].uid)
        let first = try client.checkout(details(s, version: c.version, key: "pay-1"))
        let retry = try client.checkout(details(s, version: c.version, key: "pay-1"))
        #expect(retry == first)
        #expect(try client.orders(session: s).count == 1)
    }

    @Test func theCardNumberIsNowhereInTheDatabaseOrTheLogs() throws {
        let s = try session()
        let number = "4000 0566 5566 5556"
        let c = try client.addItem(cart(s), productUID: products[11].uid)
        _ = try client.checkout(details(s, version: c.version, number: number, cvc: "7391"))
        // A refused attempt with another number must not leave it either.
        let c2 = try client.addItem(cart(s), productUID: products[11].uid)
        expectStatus(.invalidArgument) { _ = try client.checkout(details(s, version: c2.version, number: "4000 0566 5566 5557")) }
        #expect(daemon.terminate() == 0)
        let digits = number.replacingOccurrences(of: " ", with: "")
        var files = [daemon.stderrPath]
        files += filesUnder(daemon.dataDirectory)
        #expect(files.contains { $0.hasSuffix("groser.sqlite3") })
        for file in files {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            for needle in [number, digits, "4000056655665557", "4000 0566 5566 5557"] {
                #expect(data.range(of: Data(needle.utf8)) == nil, "\(needle) found in \(file)")
            }
        }
        try daemon.start()
        #expect(try client.orders(session: s).first?.cardLast4 == "5556")
    }

    @Test func acknowledgedAddsSurviveKill9() throws {
        // Five rounds: writers add while the daemon is killed at a random moment.
        let daemon = try Daemon(extraArguments: ["--max-quantity", "1000000"])
        let client = daemon.client()
        let s = try client.openSession()
        let watched = Array(products.prefix(4)).map(\.uid)
        var acknowledged = [String: Int](uniqueKeysWithValues: watched.map { ($0, 0) })
        for round in 0..<5 {
            let counts = Counter()
            let path = daemon.socketPath
            let store = storeUID
            var threads: [Thread] = []
            for product in watched {
                // Real threads: a busy Dispatch pool could start them after the kill.
                let t = Thread {
                    let own = GroserClient(socketPath: path, timeout: 2)
                    while true {
                        do {
                            _ = try own.addItem(CartMutation(session: s, storeUID: store), productUID: product)
                            counts.increment(product)
                        } catch { counts.fail(product, "\(error)"); return }  // the daemon died
                    }
                }
                threads.append(t)
                t.start()
            }
            // Once every writer is under way, kill at a random moment.
            let deadline = Date().addingTimeInterval(10)
            while watched.contains(where: { counts.value($0) == 0 }) && Date() < deadline { usleep(1000) }
            // Not a wait: the random moment of the kill is the scenario (each
            // round dies at another point of the writers' adds and commits).
            usleep(UInt32.random(in: 0...300_000))
            daemon.killHard()
            while threads.contains(where: { !$0.isFinished }) { usleep(5000) }
            try daemon.start()
            let c = try client.cart(session: s, storeUID: storeUID)
            for product in watched {
                let before = acknowledged[product]!
                let acked = counts.value(product)
                let stored = Int(c.lines.first { $0.productUID == product }?.quantity ?? 0)
                // Every acknowledged add is there; the one add in flight when
                // the daemon died may have committed too.
                #expect(stored >= before + acked, "round \(round): \(product) has \(stored) < \(before + acked) acknowledged")
                #expect(stored <= before + acked + 1, "round \(round): at most the one add in flight may be extra")
                acknowledged[product] = stored
            }
            #expect(watched.allSatisfy { counts.value($0) > 0 }, "every writer got adds acknowledged before the kill: \(watched.map { counts.value($0) }) \(counts.reasons)")
        }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    func increment(_ k: String) { lock.lock(); counts[k, default: 0] += 1; lock.unlock() }
    func value(_ k: String) -> Int { lock.lock(); defer { lock.unlock() }; return counts[k] ?? 0 }
    private var failures: [String: String] = [:]
    func fail(_ k: String, _ why: String) { lock.lock(); failures[k] = why; lock.unlock() }
    var reasons: [String: String] { lock.lock(); defer { lock.unlock() }; return failures }
}
