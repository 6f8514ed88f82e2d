@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// A shard changes its state as a batch runs (its later requests see the
/// changes) and undoes every change when the batch cannot be made durable.
@Suite("customer shard batches")
struct CustomerShardBatchTests {
    @Test("a batch whose append fails leaves the state as it was")
    func failedBatchIsUndone() throws {
        let directory = try ScratchDirectory()
        let log = FlakyCustomerStore()
        let (customers, storeUID, products) = try oneShardShop(directory, log)

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

/// What a shard logs rebuilds the carts it holds: every change of one line
/// logged as that line (kind 10), anything else as the whole cart, and a
/// batch whose append failed leaving nothing behind in either.
@Suite("customer shard log records")
struct CustomerShardLogRecordTests {
    @Test func theLogsRecordsRebuildTheShardsCartsFailedBatchesIncluded() throws {
        let directory = try ScratchDirectory()
        let log = FlakyCustomerStore()
        let (customers, storeUID, inStock) = try oneShardShop(directory, log)
        let products = Array(inStock.prefix(6))
        var tokens: [String] = []
        for _ in 0..<3 {
            guard case .ok(_, let opened) = customers.answerNow(Request(id: 1, method: .openSession)),
                  case .openSession(let token) = try decode(.openSession, opened) else { throw SetupError("no session") }
            tokens.append(token)
        }
        var g = SplitMix64(seed: 11)
        var failedBatches = 0, answered = 0
        // The log replayed as it grows, checked against the shard after every batch.
        var replayed = CustomerState()
        var replayedCount = 0
        for step in 0..<300 {
            // One to three requests a batch, as a running shard takes them.
            let methods: [RequestMethod] = (0..<Int(1 + g.next() % 3)).map { _ in
                let m = CartMutation(session: tokens[Int(g.next() % 3)], storeUID: storeUID)
                let uid = products[Int(g.next() % UInt64(products.count))]
                switch g.next() % 10 {
                case 0: return .clearCart(m)
                case 1, 2: return .removeItem(m, productUID: uid)
                case 3: return .setQuantity(m, productUID: uid, quantity: UInt32(g.next() % 4))
                default: return .addItem(m, productUID: uid, quantity: 1)
                }
            }
            log.failing = g.next() % 8 == 0
            let jobs = methods.enumerated().map { i, method in
                ShardJob(job: CommerceJob(request: Request(id: UInt64(step * 4 + i + 1), method: method), caller: Caller(uid: nil),
                                          receivedAt: monotonicNanoseconds()) { _ in },
                         key: method.sessionToken.map { SessionKey(token: $0) })
            }
            let outcomes = customers.shards[0].process(jobs, bodiesWanted: false)
            if log.failing {
                failedBatches += 1
                // Nothing of a batch that could not be saved is acknowledged
                // (a batch of refusals only has nothing to save).
                #expect(!outcomes.contains { if case .ok = $0 { true } else { false } }, "step \(step)")
            } else {
                answered += outcomes.filter { if case .ok = $0 { true } else { false } }.count
            }
            for r in log.records[replayedCount...] { replayed.apply(r) }
            replayedCount = log.records.count
            #expect(replayed.sessions.mapValues(\.carts) == customers.shards[0].currentState.sessions.mapValues(\.carts),
                    "after batch \(step)")
        }
        log.failing = false
        let live = customers.shards[0].currentState
        #expect(replayed.skippedLineChanges == 0, "every line change follows its cart's version")
        #expect(replayed.sessions.mapValues(\.carts) == live.sessions.mapValues(\.carts))
        let lines = log.records.filter { if case .cartLine = $0 { true } else { false } }.count
        let whole = log.records.filter { if case .cart = $0 { true } else { false } }.count
        #expect(lines > 200 && whole > 10, "both kinds were logged: \(lines) line changes, \(whole) whole carts")
        #expect(failedBatches > 20 && answered > 300, "\(failedBatches) failed batches, \(answered) answers")
    }
}
