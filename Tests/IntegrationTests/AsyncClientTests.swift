import Foundation
import GroserClient
import GroserSystem
import Testing

/// Threads this process has now.
private func threadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
}

/// A stand-in for groserd where groserd cannot do what a test needs: it
/// accepts one connection, reads `expecting` ServerInfo requests, and then
/// answers them in reverse order (groserd answers in order; the protocol
/// lets a server answer out of order, so a client must match by id), or
/// never answers when `expecting` is 0.
private final class ReversingServer: @unchecked Sendable {
    let path: String
    private let listener: Socket
    private var thread: OSThread?
    /// How many requests it has read so far.
    var received: Int { receivedCount.withLock { $0 } }
    private let receivedCount = Locked(0)

    init(directory: String, expecting: Int) throws {
        path = directory + "/rev.sock"
        listener = try Socket.unixStream(nonBlocking: false)
        try listener.bind(path: path, mode: 0o600)
        try listener.listen(backlog: 4)
        let listener = self.listener
        let receivedCount = self.receivedCount
        thread = try OSThread(name: "reversing-server") {
            guard let connection = try? listener.accept() else { return }
            try? connection.setNonBlocking(false)
            var decoder = FrameDecoder()
            var ids: [UInt64] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while ids.count < expecting || expecting == 0 {
                let n = buffer.withUnsafeMutableBytes { raw in (try? connection.read(into: raw)) ?? .processed(0) }
                guard case .processed(let count) = n, count > 0 else { break }
                decoder.append(buffer[0..<count])
                while let body = try? decoder.next(), let request = try? Request.decode(body) {
                    ids.append(request.id)
                    receivedCount.withLock { $0 += 1 }
                }
            }
            for id in ids.reversed() {
                // Response { id, server_info { server_version: "answer to <id>" } }, written by hand.
                let version = Array("answer to \(id)".utf8)
                let info: [UInt8] = [0x0A, UInt8(version.count)] + version
                var response: [UInt8] = [0x08]
                var v = id
                while v >= 0x80 { response.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
                response.append(UInt8(v))
                response += [0x52, UInt8(info.count)] + info
                let frame = Framing.frame(response)
                frame.withUnsafeBytes { try? connection.writeAll($0) }
            }
            // Keep the connection open until the client is done with it.
            _ = buffer.withUnsafeMutableBytes { raw in try? connection.read(into: raw) }
            connection.close()
        }
    }

    func stop() {
        listener.shutdown()
        thread?.join()
        listener.close()
    }
}

/// The client library's async calls: pipelined, bounded, cancellable.
@Suite("async client", .serialized)
struct AsyncClientTests {
    @Test func aThousandConcurrentCallsUseABoundedNumberOfThreadsAndConnections() async throws {
        let daemon = try Daemon()
        let client = GroserClient(socketPath: daemon.socketPath, timeout: 30, maxConnections: 2)
        let before = threadCount()
        let peak = Locked(0)
        let versions = try await withThrowingTaskGroup(of: UInt64.self) { group in
            for i in 0..<1000 {
                group.addTask {
                    let v = i % 2 == 0 ? try await client.serverInfo().catalogVersion
                                       : try await client.store(StoreSelector.cityCode("SPB")).catalogVersion
                    let now = threadCount()
                    peak.withLock { $0 = max($0, now) }
                    return v
                }
            }
            var all: [UInt64] = []
            for try await v in group { all.append(v) }
            return all
        }
        #expect(versions.count == 1000 && Set(versions).count == 1)
        // The cooperative pool has a thread per core; the client adds one
        // reader thread per connection, not one per call.
        let added = peak.withLock { $0 } - before
        #expect(added <= ProcessInfo.processInfo.activeProcessorCount + 2 + 2, "\(added) threads added")
        let stats = try await daemon.client().stats()
        // This stats call's own connection, and the async client's at most 2.
        #expect(stats.connections <= 3, "\(stats.connections) connections")
        client.close()
    }

    @Test func pipelinedCallsAnsweredOutOfOrderEachGetTheirOwnAnswer() async throws {
        let directory = Daemon.makeTemporaryDirectory()
        let server = try ReversingServer(directory: directory, expecting: 20)
        defer { server.stop() }
        let client = GroserClient(socketPath: server.path, timeout: 10, maxConnections: 1)
        let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for i in 0..<20 {
                group.addTask { (i, try await client.serverInfo().serverVersion) }
            }
            var all: [(Int, String)] = []
            for try await a in group { all.append(a) }
            return all
        }
        // Each call got the answer with its own request id (ids are given
        // in the order the calls were made, 1 to 20), whatever the order.
        let versions = answers.map(\.1)
        #expect(Set(versions) == Set((1...20).map { "answer to \($0)" }), "\(versions)")
        client.close()
    }

    @Test func aCancelledTaskStopsWaitingAtOnce() async throws {
        let directory = Daemon.makeTemporaryDirectory()
        let server = try ReversingServer(directory: directory, expecting: 0)
        defer { server.stop() }
        // A long timeout, so that only the cancellation can end the wait
        // early. The tasks run on a thread of their own: on the cooperative
        // pool, other suites' blocking tests delayed their resumption by up
        // to 30 s on CI, and the times measured the pool, not the client.
        let executor = try OwnThreadExecutor(name: "cancel-test")
        defer { executor.shutdown() }
        let client = GroserClient(socketPath: server.path, timeout: 120, maxConnections: 1)
        defer { client.close() }
        try await withTaskExecutorPreference(executor) {
            let started = monotonicNanoseconds()
            let task = Task(executorPreference: executor) { () async throws(GroserError) -> ServerInfo in
                try await client.serverInfo()
            }
            // Cancelled once the call is waiting for its answer: the server
            // has read the request (polled), not after a guessed 200 ms.
            let sentBy = monotonicNanoseconds() + TestTime.nanoseconds(milliseconds: 15_000)
            while server.received == 0 && monotonicNanoseconds() < sentBy { try await Task.sleep(for: .milliseconds(5)) }
            #expect(server.received == 1, "the call's request never reached the server")
            task.cancel()
            let outcome = await task.result
            let waited = Double(monotonicNanoseconds() - started) / 1e9
            guard case .failure(let error) = outcome, case .cancelled? = error as? GroserError else {
                Issue.record("expected .cancelled, got \(outcome)")
                return
            }
            #expect(waited < TestTime.seconds(10), "waited \(waited) s of a 120 s timeout")
            // The connection still carries other calls' timeouts, as a Duration.
            let timed = Task(executorPreference: executor) { () async throws(GroserError) -> ServerInfo in
                try await client.serverInfo(timeout: .milliseconds(300))
            }
            let t0 = monotonicNanoseconds()
            guard case .failure(let error) = await timed.result, case .timedOut? = error as? GroserError else {
                Issue.record("expected .timedOut")
                return
            }
            let took = Double(monotonicNanoseconds() - t0) / 1e9
            #expect(took >= 0.25 && took < TestTime.seconds(10), "timed out after \(took) s of 0.3 s (not the client's 120 s)")
        }
    }

    @Test func aScopedClientClosesItsConnectionsWhenTheScopeEnds() async throws {
        let daemon = try Daemon()
        let probe = daemon.client()
        // A connection of the daemon's start (its readiness check) may not
        // be closed yet on a busy machine: wait until only the probe's is.
        // (Polled: the sleep only spaces the checks of the counter.)
        var before = try await probe.stats().connections
        let settledBy = monotonicNanoseconds() + TestTime.nanoseconds(milliseconds: 5000)
        while before > 1 && monotonicNanoseconds() < settledBy {
            try await Task.sleep(for: .milliseconds(50))
            before = try await probe.stats().connections
        }
        #expect(before == 1, "\(before) connections besides nothing but the probe's")
        var escaped: GroserClient?
        var during: UInt64 = 0
        let version = try await withGroserClient(location: SocketLocation(path: daemon.socketPath, isExplicit: true)) { client in
            escaped = client
            let v = try await client.serverInfo().protocolVersion
            during = try await probe.stats().connections
            return v
        }
        #expect(version == 1)
        #expect(during == before + 1, "the scoped client's connection was not counted: \(during) during, \(before) before")
        // The client is still referenced, and yet its connection is closed.
        #expect(escaped != nil)
        // Polled as above: closing is seen by groserd a moment later.
        var now = try await probe.stats().connections
        let closedBy = monotonicNanoseconds() + TestTime.nanoseconds(milliseconds: 5000)
        while now != before && monotonicNanoseconds() < closedBy {
            try await Task.sleep(for: .milliseconds(50))
            now = try await probe.stats().connections
        }
        #expect(now == before, "\(now) connections after the scope, \(before) before it")
    }

    @Test func importingTheClientLeavesSwiftsDecodingErrorVisible() {
        // GroserClient re-exports its wire module; no name in it hides the
        // standard library's (this line would not compile if one did).
        let error: any Error = DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x"))
        #expect(error is Swift.DecodingError)
    }
}
