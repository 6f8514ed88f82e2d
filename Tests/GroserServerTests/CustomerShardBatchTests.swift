@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// A customer store in memory whose appends fail while `failing` is set,
/// as they do on a full disk.
private final class FlakyCustomerStore: CustomerStore, @unchecked Sendable {
    // @unchecked: only the test's thread calls it (the shard's thread is not started).
    var failing = false
    var records: [CustomerRecord] = []
    func load(into state: inout CustomerState) throws(StorageError) -> String { "empty" }
    func append(_ records: [CustomerRecord]) throws(StorageError) {
        if failing { throw StorageError("no space left on device") }
        self.records += records
    }
    func checkpointDue() throws(StorageError) -> Bool { false }
    func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int { 0 }
}

/// A shard changes its state as a batch runs (its later requests see the
/// changes) and undoes every change when the batch cannot be made durable.
@Suite("customer shard batches")
struct CustomerShardBatchTests {
    @Test("a batch whose append fails leaves the state as it was")
    func failedBatchIsUndone() throws {
        let directory = try ScratchDirectory()
        let catalogStore = try SQLiteCatalogStore(directory: directory.path)
        let catalog = try CatalogService(store: catalogStore, imageBaseURL: imageBase)
        let log = FlakyCustomerStore()
        let customers = try CustomerService(
            stores: [log], rules: CartRules(), lifetimes: CustomerLifetimes(), catalog: catalog, orders: catalogStore,
            products: { (uid) throws(StorageError) in try catalogStore.productFacts(uid) }, logger: Logger(level: .error, sink: { _ in }))
        let storeUID = try #require(sample.cities.first { $0.code == "SPB" }).defaultStoreUID
        let store = try #require(sample.stores.first { $0.uid == storeUID })
        let products = store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }.map(\.uid)

        guard case .ok(_, let opened) = customers.answerNow(Request(id: 1, method: .openSession)),
              case .openSession(let token) = try decode(.openSession, opened) else { throw SetupError("no session") }
        let mutation = { (key: String) in CartMutation(session: token, storeUID: storeUID, idempotencyKey: key, expectedVersion: 0) }
        let getCart = Request(id: 1, method: .getCart(session: token, storeUID: storeUID))
        let firstAdd = Request(id: 1, method: .addItem(mutation("k1"), productUID: products[0], quantity: 1))
        let first = customers.answerNow(firstAdd)
        guard case .ok = first else { throw SetupError("the first add was refused: \(first)") }
        let before = customers.answerNow(getCart)
        let sessions = customers.shards[0].sessionCount
        let logged = log.records

        // One batch: a cart changed three times (with remembered answers)
        // and a session opened, all undone when the append fails.
        log.failing = true
        let key = SessionKey(token: token)
        let methods: [RequestMethod] = [
            .addItem(mutation("k2"), productUID: products[0], quantity: 2),
            .addItem(mutation(""), productUID: products[1], quantity: 1),
            .openSession,
            .removeItem(mutation(""), productUID: products[0]),
            .clearCart(mutation("k3")),
        ]
        // The frames the requests' callers get, as a running shard sends
        // them (bodiesWanted: false: keyless adds go out as prebuilt frames).
        let replies = Locked<[UInt64: [UInt8]]>([:])
        let jobs = methods.enumerated().map { i, method in
            ShardJob(job: CommerceJob(request: Request(id: UInt64(i + 1), method: method), caller: Caller(uid: nil),
                                      receivedAt: monotonicNanoseconds()) { frame in
                                          replies.withLock { $0[UInt64(i + 1)] = frame }
                                      },
                     key: method == .openSession ? nil : key)
        }
        let outcomes = customers.shards[0].process(jobs, bodiesWanted: false)
        #expect(outcomes.count == methods.count)
        for outcome in outcomes {
            guard case .failed(let status) = outcome else { Issue.record("answered \(outcome) while the log was failing"); continue }
            #expect(status.code == .unavailable)
        }
        let sent = replies.withLock { $0 }
        #expect(sent.count == methods.count, "every request is answered once")
        for (id, frame) in sent {
            let (answeredID, status) = frame.withUnsafeBytes { ResponseFramePeek.idAndStatus($0) }
            #expect(answeredID == id && status == .unavailable, "request \(id) was answered \(status)")
        }
        log.failing = false

        #expect(customers.answerNow(getCart) == before, "the cart is as it was before the batch")
        #expect(customers.shards[0].sessionCount == sessions, "the session the batch opened is gone")
        #expect(log.records == logged, "nothing of the batch is in the log")
        #expect(customers.answerNow(firstAdd) == first, "the answer remembered before the batch is still remembered")
        // k2's answer was not remembered: the add runs now, on the cart as it was.
        guard case .ok(_, let body) = customers.answerNow(Request(id: 1, method: .addItem(mutation("k2"), productUID: products[0], quantity: 2))),
              case .cart(let cart) = try decode(.addItem, body) else { throw SetupError("the add was refused") }
        #expect(cart.version == 2)
        #expect(cart.lines.map(\.productUID) == [products[0]])
        #expect(cart.lines.map(\.quantity) == [3])
    }
}

private func decode(_ field: MethodField, _ body: [UInt8]) throws -> ResponseBody {
    var frame: [UInt8] = []
    ResponseFrameWriter.appendOK(id: 1, field: field, body: body, to: &frame)
    return try Response.decode(frame.dropFirst(4)).body
}
