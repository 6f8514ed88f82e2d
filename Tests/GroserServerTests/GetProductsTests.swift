@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// GetProducts, answered from the encoded catalog (ProductsAnswer.swift)
/// through the store's uid index (ProductIndex.swift).
@Suite("GetProducts")
struct GetProductsTests {
    /// Every product of a store as the daemon serves it (absolute image URLs), by uid.
    func served(_ storeUID: String) throws -> [String: Product] {
        let store = try #require(sample.stores.first(where: { $0.uid == storeUID }))
        let products = withAbsoluteImages(store).departments.flatMap(\.shelves).flatMap(\.products)
        return Dictionary(products.map { ($0.uid, $0) }, uniquingKeysWith: { a, _ in a })
    }

    func products(_ r: Response) -> GetProductsResponse? { if case .getProducts(let v) = r.body { v } else { nil } }

    /// Every product of every store is found by its uid, as GetShelf sends it.
    @Test(arguments: sample.stores.map(\.uid))
    func everyProductIsFoundByItsUID(_ storeUID: String) throws {
        let byUID = try served(storeUID)
        let uids = Array(byUID.keys.sorted())
        for chunk in stride(from: 0, to: uids.count, by: 200).map({ Array(uids[$0..<min($0 + 200, uids.count)]) }) {
            let r = try call(Request(id: 5, method: .getProducts(GetProductsRequest(storeUID: storeUID, productUIDs: chunk))))
            #expect(r.status == .ok)
            let v = try #require(products(r))
            #expect(v.products == chunk.map { byUID[$0]! })
            #expect(v.missingUIDs.isEmpty)
            #expect(v.storeVersion == encodedSample.stores[storeUID]!.version && v.catalogVersion == catalogVersion)
        }
    }

    /// The order asked is kept, a uid asked twice is answered once, and uids
    /// the store does not sell (another store's among them) are listed.
    @Test func orderDuplicatesAndMissing() throws {
        let spb = try served("store-spb-1")
        let others = sample.stores.filter { $0.uid != "store-spb-1" }.flatMap(\.departments).flatMap(\.shelves).flatMap(\.products)
        let foreign = try #require(others.map(\.uid).first(where: { spb[$0] == nil }))
        let known = Array(spb.keys.sorted().prefix(3))
        let asked = [known[2], "nope", known[0], known[2], foreign, known[1], "nope"]
        let v = try #require(products(call(Request(id: 6, method: .getProducts(GetProductsRequest(storeUID: "store-spb-1", productUIDs: asked))))))
        #expect(v.products.map(\.uid) == [known[2], known[0], known[1]])
        #expect(v.missingUIDs == ["nope", foreign])
    }

    /// The answer written by hand is the bytes protobuf-c writes for it.
    @Test func theHandWrittenBodyIsProtobufCsEncoding() throws {
        let spb = try served("store-spb-1")
        let asked = Array(spb.keys.sorted().prefix(4)) + ["missing-1"]
        var out: [UInt8] = []
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        _ = Request(id: 3, method: .getProducts(GetProductsRequest(storeUID: "store-spb-1", productUIDs: asked))).encoded().withUnsafeBytes {
            handler.respond(toFrame: $0, receivedAt: monotonicNanoseconds(), peerIsOperator: { false }, into: &out)
        }
        let expected = GetProductsResponse(products: asked.dropLast().map { spb[$0]! }, missingUIDs: ["missing-1"],
                                           storeVersion: encodedSample.stores["store-spb-1"]!.version, catalogVersion: catalogVersion)
        #expect(out == Response(id: 3, body: .getProducts(expected)).encodedFrame())
    }

    @Test(arguments: [
        Labeled("no store", (GetProductsRequest(storeUID: "", productUIDs: ["a"]), StatusCode.invalidArgument, "GetProducts needs a store_uid.")),
        Labeled("unknown store", (GetProductsRequest(storeUID: "store-x", productUIDs: ["a"]), .notFound, "No store has the uid \"store-x\".")),
        Labeled("too many", (GetProductsRequest(storeUID: "store-spb-1", productUIDs: (0...200).map { "p\($0)" }), .invalidArgument,
                             "GetProducts takes at most 200 product_uids; this request has 201.")),
    ])
    func refusals(_ c: Labeled<(GetProductsRequest, StatusCode, String)>) throws {
        let r = try call(Request(id: 4, method: .getProducts(c.value.0)))
        #expect(r.status == Status(c.value.1, c.value.2))
        #expect(r.body == .none)
    }

    /// An answer larger than the server's answer maximum is refused, not sent.
    @Test func anAnswerPastTheMaximumIsRefused() throws {
        let uids = Array(try served("store-spb-1").keys.sorted().prefix(20))
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds(), maximumAnswerBytes: 1_000)
        let r = try call(Request(id: 8, method: .getProducts(GetProductsRequest(storeUID: "store-spb-1", productUIDs: uids))), handler: handler)
        #expect(r.status.code == .resourceExhausted && r.status.message.hasSuffix("ask for fewer at a time."))
    }

    /// A price change keeps the index (same uids in the same places) and the
    /// answer shows the new price.
    @Test func aPriceChangeIsAnsweredWithTheNewPrice() throws {
        let store = try #require(sample.stores.first(where: { $0.uid == "store-spb-1" }))
        let shelf = store.departments[0].shelves[0]
        var changed = shelf.products
        changed[0].price.minorUnits += 100
        let (next, _) = try #require(encodedSample.replacing(shelves: [shelf.uid: changed], version: catalogVersion + 1))
        let handler = RequestHandler(catalog: next, startedAtNanoseconds: monotonicNanoseconds())
        let r = try call(Request(id: 9, method: .getProducts(GetProductsRequest(storeUID: "store-spb-1", productUIDs: [changed[0].uid]))),
                         handler: handler)
        #expect(products(r)?.products.first?.price == changed[0].price)
    }
}
