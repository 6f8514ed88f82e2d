import Foundation
import GroserClient
import GroserSystem
import Testing

@Suite("graceful shutdown under load", .serialized)
struct ShutdownTests {
    @Test func sigtermWhileFiftyClientsPipelineLosesNoFrame() throws {
        let daemon = try Daemon()
        let setup = daemon.client()
        let session = try setup.openSession()
        let store = try setup.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })

        let connections = try (0..<50).map { _ in try RawConnection(path: daemon.socketPath) }
        let results = Counter()
        let problems = Mutex2()
        let threads: [Thread] = connections.enumerated().map { (index, conn) in
            Thread {
                var sent: [UInt64] = []
                var next: UInt64 = 1
                var answered = 0
                // Keep pipelining batches until the server closes the connection.
                outer: while true {
                    var batch: [UInt8] = []
                    for _ in 0..<20 {
                        let id = next
                        next += 1
                        sent.append(id)
                        let method: RequestMethod = id % 5 == 0
                            ? .addItem(CartMutation(session: session, storeUID: store.uid), productUID: product.uid, quantity: 1)
                            : (id % 2 == 0 ? .listCities : .getStore(selector: .cityCode("SPB"), includeProducts: false))
                        batch += Framing.frame(Request(id: id, method: method).encoded())
                    }
                    do { try conn.send(batch) } catch { break outer }
                    // A whole batch answered and the next one sent: pipelining.
                    if sent.count == 40 { results.increment("pipelining") }
                    for _ in 0..<20 {
                        do {
                            guard let r = try conn.receive(timeoutMilliseconds: 10_000) else { break outer }
                            guard r.id == sent[answered] else {
                                problems.add("connection \(index): answer \(r.id) where \(sent[answered]) was due")
                                break outer
                            }
                            if !r.status.isOK && r.status.code != .unavailable && r.status.code != .failedPrecondition {
                                problems.add("connection \(index): \(r.status)")
                            }
                            answered += 1
                        } catch {
                            // A read error after the close is fine; a decode error is not.
                            if !(error is Errno) { problems.add("connection \(index): \(error)") }
                            break outer
                        }
                    }
                }
                if conn.decoder.bufferedByteCount != 0 {
                    problems.add("connection \(index): closed mid-frame with \(conn.decoder.bufferedByteCount) bytes buffered")
                }
                results.increment(answered > 0 ? "served" : "idle")
            }
        }
        threads.forEach { $0.start() }
        // SIGTERM once every client is in the middle of pipelining: each has
        // had a whole batch answered and sent its second (a counter, not a pause).
        #expect(eventually(seconds: 30) { results.value("pipelining") == connections.count },
                "only \(results.value("pipelining")) of \(connections.count) clients got to their second batch")
        let started = Date()
        #expect(daemon.terminate() == 0)
        // The time is the behaviour (a prompt exit), scaled for slow builds.
        let took = Date().timeIntervalSince(started)
        #expect(took < TestTime.seconds(5), "exits within 5 s (scaled): took \(took) s")
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        #expect(problems.values.isEmpty, "\(problems.values.prefix(5))")
        #expect(results.value("served") == 50)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }
}
