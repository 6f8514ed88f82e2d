import Foundation
import GroserClient
import GroserSystem
import Testing

/// Large stores through a real groserd whose frame maximum is smaller than
/// a store with its products: the answer is refused pointing at paging, and
/// the library and groser-client page for the caller.
@Suite("catalog paging and revalidation", .serialized)
struct CatalogPagingTests {
    static let frameMaximum = 30_000

    @Test func aStoreLargerThanAFrameIsPagedByTheLibraryAndTheCLI() throws {
        let daemon = try Daemon(extraArguments: ["--max-frame-bytes", String(Self.frameMaximum)])
        let client = daemon.client()
        // The whole store no longer fits: a clear refusal, the connection stays usable.
        do {
            _ = try client.store(.cityCode("SPB"), includeProducts: true)
            Issue.record("a store over the frame maximum was sent whole")
        } catch {
            #expect(error.status?.code == .resourceExhausted && error.status?.message.contains("ListProducts") == true, "\(error)")
        }
        let bare = try client.store(.cityCode("SPB"))
        let expectedCount = bare.store.departments.flatMap(\.shelves).reduce(0) { $0 + Int($1.productCount) }
        #expect(expectedCount > 200)

        let whole = try client.storeWithProducts(.cityCode("SPB"))
        let products = whole.store.departments.flatMap(\.shelves).flatMap(\.products)
        #expect(products.count == expectedCount, "every product once")
        #expect(Set(products.map(\.uid)).count == expectedCount)
        for shelf in whole.store.departments.flatMap(\.shelves) {
            #expect(shelf.products.count == Int(shelf.productCount), "\(shelf.uid)")
            #expect(shelf.products.allSatisfy { $0.shelfUID == shelf.uid })
        }

        var iterator = client.products(store: bare.store.uid, pageSize: 37)
        var blocking: [String] = []
        while let p = try iterator.next() { blocking.append(p.uid) }
        #expect(blocking == products.map(\.uid))
        #expect(iterator.totalSize == UInt32(expectedCount))

        let cli = try runClient(["get-store", "--city", "SPB", "--products"], socket: daemon.socketPath)
        #expect(cli.status == 0, "\(cli.err)")
        for p in products.prefix(50) { #expect(cli.out.contains(p.uid), "\(p.uid) missing from get-store --products") }
        #expect(products.allSatisfy { cli.out.contains($0.uid) })
    }

    @Test func theAsyncSequenceYieldsTheSameProducts() async throws {
        let daemon = try Daemon(extraArguments: ["--max-frame-bytes", String(Self.frameMaximum)])
        let client = daemon.client()
        let whole = try await client.storeWithProducts(.cityCode("SPB"))
        let expected = whole.store.departments.flatMap(\.shelves).flatMap(\.products).map(\.uid)
        var streamed: [String] = []
        for try await p in client.productSequence(store: whole.store.uid, pageSize: 50) { streamed.append(p.uid) }
        #expect(streamed == expected && !expected.isEmpty)
    }

    @Test func revalidationThroughTheDaemonCostsAFewBytesAndFollowsChanges() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let first = try client.store(.cityCode("SPB"), includeProducts: true)
        #expect(first.storeVersion > 0 && !first.notModified)
        guard case .getStore(let same) = try client.call(.getStore(selector: .cityCode("SPB"), includeProducts: true,
                                                                    knownStoreVersion: first.storeVersion)) else {
            Issue.record("not a GetStore answer")
            return
        }
        #expect(same.notModified && same.store.departments.isEmpty)
        let product = first.store.departments[0].shelves[0].products[0]
        _ = try client.setProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: product.price.minorUnits + 100))
        guard case .getStore(let changed) = try client.call(.getStore(selector: .cityCode("SPB"), includeProducts: true,
                                                                       knownStoreVersion: first.storeVersion)) else {
            Issue.record("not a GetStore answer")
            return
        }
        #expect(!changed.notModified && changed.storeVersion > first.storeVersion)
        #expect(changed.store.departments[0].shelves[0].products.first { $0.uid == product.uid }?.price.minorUnits == product.price.minorUnits + 100)
        // Versions survive a restart: the same store version still revalidates.
        #expect(daemon.terminate() == 0)
        try daemon.start()
        guard case .getStore(let afterRestart) = try client.call(.getStore(selector: .cityCode("SPB"), includeProducts: false,
                                                                            knownStoreVersion: changed.storeVersion)) else {
            Issue.record("not a GetStore answer")
            return
        }
        #expect(afterRestart.notModified, "store version \(changed.storeVersion) after a restart: \(afterRestart.storeVersion)")
    }
}
