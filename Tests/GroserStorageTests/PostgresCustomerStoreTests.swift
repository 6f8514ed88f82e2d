import GroserStorage
import GroserWire
import Testing

/// The shared customer store against a real PostgreSQL: two store objects
/// on one database stand for two hosts' shards.
@Suite("PostgresCustomerStore", .serialized, .enabled(if: testPostgres != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
struct PostgresCustomerStoreTests {
    let db: TestPostgresDatabase
    let hostA: PostgresCustomerStore
    let hostB: PostgresCustomerStore
    let key = SessionKey(token: "0123456789abcdef0123456789abcdef")

    init() throws {
        db = try TestPostgresDatabase()
        // The schema (and its customer tables) comes with the catalog store.
        _ = try PostgresCatalogStore(conninfo: db.conninfo, seedSampleCatalog: false)
        hostA = PostgresCustomerStore(conninfo: db.conninfo)
        hostB = PostgresCustomerStore(conninfo: db.conninfo)
    }

    private func answer(_ body: UInt8, at: Int64 = 1_000) -> StoredAnswer {
        StoredAnswer(IdempotentAnswer(fingerprint: "add|p|\(body)", field: 7, body: [body, 0, 255]), atUnix: at)
    }

    /// Writes a session with a cart and `names` answers through `store`.
    private func write(_ store: PostgresCustomerStore, names: [String]) throws {
        _ = try store.begin(reading: [key], answers: [], answerCutoff: 0)
        var state = CustomerState()
        var records: [CustomerRecord] = [.session(key, createdAtUnix: 1_000)]
        let cart = StoredCart(version: 1, lines: [CartLineRecord(productUID: "milk", quantity: 2, seenPriceMinorUnits: 8_990)])
        records.append(.cart(key, storeUID: "store-spb-1", cart, atUnix: 1_000))
        for (i, name) in names.enumerated() { records.append(.answer(key, key: name, answer(UInt8(i)))) }
        for r in records { state.apply(r) }
        try store.commit(records, state: state, answerCutoff: 0)
    }

    @Test func aSessionWrittenOnOneHostIsReadOnTheOtherWithOnlyTheAnswersNamed() throws {
        try write(hostA, names: ["k1", "k2", "k3"])
        let read = try hostB.begin(reading: [key], answers: [(key, "k2"), (key, "unknown")], answerCutoff: 0)
        hostB.rollback()
        let session = try #require(read[key] ?? nil)
        #expect(session.carts["store-spb-1"]?.lines.first?.quantity == 2 && session.carts["store-spb-1"]?.version == 1)
        #expect(Array(session.answers.keys) == ["k2"], "only the answer the batch may replay is read")
        #expect(session.answers["k2"]?.answer.body == [1, 0, 255])
        // An expired answer is not read.
        let later = try hostB.begin(reading: [key], answers: [(key, "k1")], answerCutoff: 2_000)
        hostB.rollback()
        #expect((later[key] ?? nil)?.answers.isEmpty == true)
        // A session nobody stored reads as absent.
        let other = SessionKey(token: "ffffffffffffffffffffffffffffffff")
        let absent = try hostB.begin(reading: [other], answers: [], answerCutoff: 0)
        hostB.rollback()
        #expect(absent[other] == .some(nil))
    }

    @Test func twoHostsCreatingOneSessionConflictAndTheSecondWritesNothing() throws {
        // Both read "no such session" (nothing to lock), both write it.
        _ = try hostA.begin(reading: [key], answers: [], answerCutoff: 0)
        _ = try hostB.begin(reading: [key], answers: [], answerCutoff: 0)
        var state = CustomerState()
        state.apply(.session(key, createdAtUnix: 1_000))
        try hostA.commit([.session(key, createdAtUnix: 1_000)], state: state, answerCutoff: 0)
        var other = CustomerState()
        let cart = StoredCart(version: 1, lines: [CartLineRecord(productUID: "bread", quantity: 1, seenPriceMinorUnits: 5_000)])
        let records: [CustomerRecord] = [.session(key, createdAtUnix: 1_001), .cart(key, storeUID: "s", cart, atUnix: 1_001)]
        for r in records { other.apply(r) }
        let error = #expect(throws: StorageError.self) { try hostB.commit(records, state: other, answerCutoff: 0) }
        #expect(error?.isConflict == true, "\(String(describing: error))")
        // The first write stands; B, reading again, sees it and can go on.
        let read = try hostB.begin(reading: [key], answers: [], answerCutoff: 0)
        let session = try #require(read[key] ?? nil)
        #expect(session.createdAtUnix == 1_000 && session.carts.isEmpty)
        other = CustomerState()
        other.sessions[key] = session
        other.apply(.cart(key, storeUID: "s", cart, atUnix: 1_002))
        try hostB.commit([.cart(key, storeUID: "s", cart, atUnix: 1_002)], state: other, answerCutoff: 0)
        let final = try hostA.begin(reading: [key], answers: [], answerCutoff: 0)
        hostA.rollback()
        #expect((final[key] ?? nil)?.carts["s"] == cart)
    }

    @Test func anIdempotencyKeyAnsweredOnOneHostCannotBeStoredAgainOnAnother() throws {
        try write(hostA, names: ["pay-1"])
        // Host B did not read the answer (its batch named another key) and
        // tries to store its own under the same key: the primary key refuses.
        let read = try hostB.begin(reading: [key], answers: [], answerCutoff: 0)
        var state = CustomerState()
        state.sessions[key] = try #require(read[key] ?? nil)
        let mine = answer(9)
        state.apply(.answer(key, key: "pay-1", mine))
        let error = #expect(throws: StorageError.self) {
            try hostB.commit([.answer(key, key: "pay-1", mine)], state: state, answerCutoff: 0)
        }
        #expect(error?.isConflict == true)
        let again = try hostB.begin(reading: [key], answers: [(key, "pay-1")], answerCutoff: 0)
        hostB.rollback()
        #expect((again[key] ?? nil)?.answers["pay-1"]?.answer.body == [0, 0, 255], "the first answer stays")
    }
}
