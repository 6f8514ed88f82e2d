@testable import GroserServer
import GroserStorage
@testable import GroserSystem
import GroserWire
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The commit queue's promises: every request it takes gets exactly one
/// answer, even when the store fails in the middle of a batch; requests of a
/// closed connection are not run; at shutdown,
/// queued requests are dropped unrun (their clients saw no answer, which
/// means "not executed").
@Suite("commit queue")
struct CommitQueueTests {
    /// A store whose transactions count what they run and can fail the Nth savepoint.
    final class FakeStore: CommerceStore, CatalogStore, @unchecked Sendable {
        // @unchecked: counters behind a Mutex.
        let counts = Mutex((savepoints: 0, updates: 0, writes: 0))
        let failSavepoint: Int?

        init(failSavepoint: Int? = nil) { self.failSavepoint = failSavepoint }

        func write<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws(StorageError) -> T {
            counts.withLock { $0.writes += 1 }
            return try body(FakeTransaction(store: self))
        }

        func loadCatalog(_ visit: (CatalogPart) throws(StorageError) -> Void) throws(StorageError) {
            try visit(.cities([], version: 1))
        }

        func catalogVersion() throws(StorageError) -> UInt64 { 1 }

        func loadChangedShelves(since version: UInt64) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) {
            (1, [:])
        }
    }

    struct FakeTransaction: CommerceTransaction {
        let store: FakeStore
        func savepoint() throws(StorageError) {
            let n = store.counts.withLock { $0.savepoints += 1; return $0.savepoints }
            if n == store.failSavepoint { throw StorageError("disk full (fake)") }
        }
        func rollbackToSavepoint() throws(StorageError) {}
        func releaseSavepoint() throws(StorageError) {}
        func storeCityCode(_ storeUID: String) throws(StorageError) -> String? { nil }
        func product(_ uid: String) throws(StorageError) -> ProductRecord? {
            ProductRecord(uid: uid, storeUID: "s", name: "n", price: Money(minorUnits: 1, currency: "RUB"), stock: 1)
        }
        func catalogProduct(_ uid: String) throws(StorageError) -> (Product, UInt32)? {
            (Product(uid: uid, name: "n", brand: "", unit: "", unitSize: 1,
                     price: Money(minorUnits: 1, currency: "RUB"), imageURL: "", outOfStock: false, oftenOutOfStock: false, shelfUID: "h"), 1)
        }
        func idempotentAnswer(session: SessionKey, key: String) throws(StorageError) -> IdempotentAnswer? { nil }
        func saveIdempotentAnswer(session: SessionKey, key: String, _ answer: IdempotentAnswer) throws(StorageError) {}
        func decrementStock(productUID: String, by quantity: UInt32) throws(StorageError) {}
        func updateProduct(_ update: ProductUpdate) throws(StorageError) {
            store.counts.withLock { $0.updates += 1 }
        }
        func bumpCatalogVersion(touching products: [String]) throws(StorageError) -> UInt64 { 2 }
        func insertOrder(_ order: Order, session: SessionKey) throws(StorageError) -> Order {
            throw StorageError("not in this fake")
        }
        func orders(session: SessionKey) throws(StorageError) -> [Order] { [] }
    }

    /// Answers by request id.
    final class Replies: Sendable {
        let frames = Mutex<[UInt64: [UInt8]]>([:])
        func job(_ id: UInt64, connection: ConnectionToken? = nil) -> CommerceJob {
            var job = CommerceJob(request: Request(id: id, method: .setProduct(ProductUpdate(productUID: "p", stock: 5))),
                                  caller: Caller(uid: 0),
                                  receivedAt: monotonicNanoseconds()) { [self] frame in
                frames.withLock { $0[id] = frame }
            }
            job.connection = connection
            return job
        }
        /// Waits up to 5 s for `count` answers.
        func wait(for count: Int) -> [UInt64: [UInt8]] {
            let deadline = monotonicNanoseconds() + 5_000_000_000
            while frames.withLock({ $0.count }) < count && monotonicNanoseconds() < deadline {
                usleep(2_000)
            }
            return frames.withLock { $0 }
        }
    }

    func makeQueue(_ store: FakeStore) throws -> CommitQueue {
        let catalog = try CatalogService(store: store, imageBaseURL: "http://img.test")
        return CommitQueue(store: store, service: CommerceService(adminUIDs: [], imageBaseURL: "http://img.test"),
                           catalog: catalog, logger: .silent)
    }

    static func status(_ frame: [UInt8]?) -> StatusCode? {
        guard let frame, frame.count >= 4, let r = try? Response.decode(frame[4...]) else { return nil }
        return r.status.code
    }

    @Test func aStoreFailureMidBatchStillAnswersEveryRequest() throws {
        let store = FakeStore(failSavepoint: 2)
        let queue = try makeQueue(store)
        let replies = Replies()
        // Queued before the thread starts, so all three form one batch.
        for id in 1...3 { #expect(queue.submit(replies.job(UInt64(id)))) }
        try queue.start()
        let answers = replies.wait(for: 3)
        queue.stop()
        #expect(answers.count == 3, "requests after the failing one got no answer")
        for id in 1...3 {
            #expect(Self.status(answers[UInt64(id)]) == .unavailable, "request \(id)")
        }
    }

    @Test func requestsOfAClosedConnectionAreNotRun() throws {
        let store = FakeStore()
        let queue = try makeQueue(store)
        let replies = Replies()
        let gone = ConnectionToken()
        gone.close()
        #expect(queue.submit(replies.job(1, connection: gone)))
        #expect(queue.submit(replies.job(2, connection: ConnectionToken())))
        try queue.start()
        let answers = replies.wait(for: 1)
        queue.stop()
        #expect(answers.keys.sorted() == [2])
        #expect(Self.status(answers[2]) == .ok)
        #expect(store.counts.withLock { $0.updates } == 1)
    }

    @Test func stopDropsQueuedRequestsUnrun() throws {
        let store = FakeStore()
        let queue = try makeQueue(store)
        let replies = Replies()
        for id in 1...3 { #expect(queue.submit(replies.job(UInt64(id)))) }
        queue.stop()
        #expect(!queue.submit(replies.job(4)), "a stopped queue takes nothing")
        #expect(replies.frames.withLock { $0.isEmpty })
        #expect(store.counts.withLock { $0.writes } == 0)
    }

    /// Taking in batches from a long queue keeps order and loses nothing
    /// (taking moves an index; the array is compacted now and then).
    @Test func blockingQueueKeepsOrderAcrossBatches() {
        let queue = BlockingQueue<Int>()
        for i in 0..<5000 { queue.put(i) }
        var taken: [Int] = []
        for i in 5000..<6000 {
            taken += queue.take(upTo: 7)
            queue.put(i)
        }
        queue.close()
        while true {
            let batch = queue.take(upTo: 512)
            if batch.isEmpty { break }
            taken += batch
        }
        #expect(taken == Array(0..<6000))
    }

    /// A shard's gather: `wait(forAtLeast:)` returns as soon as the count
    /// is reached (puts below it no longer wake the waiter, so the one that
    /// reaches it must), and at its timeout when it is not.
    @Test func gatherWaitEndsWhenTheCountIsReached() throws {
        let queue = BlockingQueue<Int>()
        // The puts come one by one once the gather is waiting for 10 (seen
        // in the queue), so the tenth is the one that must wake it.
        let producer = try OSThread(name: "test-producer") {
            _ = Self.poll { queue.gatherWaitingFor == 10 }
            for i in 0..<10 { queue.put(i) }
        }
        let started = monotonicNanoseconds()
        queue.wait(forAtLeast: 10, timeoutNanoseconds: 10_000_000_000)
        let waited = monotonicNanoseconds() - started
        let taken = queue.take(upTo: 100, timeoutNanoseconds: 0)
        producer.join()
        #expect(taken == Array(0..<10))
        #expect(waited < 5_000_000_000, "the tenth put did not wake the gather")

        queue.put(1)
        let alone = monotonicNanoseconds()
        queue.wait(forAtLeast: 2, timeoutNanoseconds: 30_000_000)
        #expect(monotonicNanoseconds() - alone >= 25_000_000, "the gather ended before its count or its timeout")
        // After a gather, a plain take is woken by a single put again.
        _ = queue.take(upTo: 10, timeoutNanoseconds: 0)
        // The put comes once this thread sleeps in the take (its state in
        // /proc), so the put is what must wake it.
        let taker = Self.currentThreadStat
        let later = try OSThread(name: "test-put") {
            _ = Self.poll { Self.isSleeping(taker) }
            queue.put(7)
        }
        #expect(queue.take(upTo: 10, timeoutNanoseconds: 5_000_000_000) == [7])
        later.join()
    }

    /// Polls `condition` every millisecond for up to 10 s.
    static func poll(_ condition: () -> Bool) -> Bool {
        for _ in 0..<10_000 {
            if condition() { return true }
            usleep(1000)
        }
        return condition()
    }

    /// /proc's stat file of the calling thread ("/proc/PID/task/TID/stat").
    static var currentThreadStat: String {
        var link = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &link, link.count - 1)
        return "/proc/" + String(decoding: link.prefix(max(0, n)).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/stat"
    }

    /// True when the thread of that stat file is asleep (state S: blocked).
    static func isSleeping(_ stat: String) -> Bool {
        guard let bytes = try? Files.read(stat), let close = bytes.lastIndex(of: UInt8(ascii: ")")),
              close + 2 < bytes.count else { return false }
        return bytes[close + 2] == UInt8(ascii: "S")
    }

    /// A batch's array given back is emptied and reused: what it held is
    /// released (the shard's jobs hold connections and answers), and the
    /// next batch is taken in the very same buffer, in order.
    @Test func aRecycledBatchIsEmptiedAndItsRoomReused() {
        final class Token: Sendable {}
        let queue = BlockingQueue<Token>()
        weak var first: Token?
        do {
            let t = Token()
            first = t
            queue.put(t)
        }
        for _ in 0..<99 { queue.put(Token()) }
        var batch = queue.take(upTo: 1000)
        #expect(batch.count == 100)
        let buffer = batch.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        queue.recycle(consume batch)
        #expect(first == nil, "the recycled batch still holds its elements")
        // The queue's own array goes out with the next take; the one after
        // that collects into the recycled buffer.
        queue.put(Token())
        _ = queue.take(upTo: 1000)
        let t = Token()
        queue.put(t)
        batch = queue.take(upTo: 1000)
        #expect(batch.count == 1 && batch[0] === t)
        #expect(batch.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == buffer,
                "the next batch was not taken in the recycled buffer")
    }
}

extension BlockingQueue {
    /// The count a gather now waits for (0: none waits), read under the
    /// queue's lock: a gather sets it and sleeps in one step.
    var gatherWaitingFor: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return gatherTarget
    }
}
