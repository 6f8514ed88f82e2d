import GroserSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Watching a store's catalog (PROTOCOL.md §7B). A watch has a connection
/// of its own, so the client's other calls never wait behind its frames.
/// After a lost connection it reconnects (100 ms, doubling to 5 s) and
/// resumes from the last store version it delivered: the daemon then sends
/// what changed meanwhile, or a frame with `reload` set when it no longer
/// knows; either way the resumed watch's first frame has `initial` set.
extension GroserClient {
    /// Every change of the store `selector` names, until the task is
    /// cancelled, the loop stops, or an error that reconnecting cannot mend
    /// (a refused Watch: no such store or city).
    ///
    ///     for try await change in client.watch(city: "SPB") { ... }
    public func watch(_ selector: StoreSelector, sinceVersion: UInt64 = 0,
                      reconnect: Bool = true) -> AsyncThrowingStream<WatchEvent, any Error> {
        let stopped = Atomic<Bool>(false)
        return AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1024)) { continuation in
            continuation.onTermination = { _ in stopped.store(true, ordering: .relaxed) }
            do {
                try OSThread(name: "groser-watch") {
                    do {
                        try self.watch(selector, sinceVersion: sinceVersion, reconnect: reconnect,
                                       isStopped: { stopped.load(ordering: .relaxed) }) { event in
                            if case .terminated = continuation.yield(event) { return false }
                            return true
                        }
                        continuation.finish()
                    } catch {
                        continuation.finish(throwing: error)
                    }
                }.detach()
            } catch {
                continuation.finish(throwing: GroserError.transport("cannot start a thread for the watch: \(error)"))
            }
        }
    }

    /// Every change of the city's default store.
    public func watch(city code: String, sinceVersion: UInt64 = 0) -> AsyncThrowingStream<WatchEvent, any Error> {
        watch(.cityCode(code), sinceVersion: sinceVersion)
    }

    /// Every change of the store.
    public func watch(store uid: String, sinceVersion: UInt64 = 0) -> AsyncThrowingStream<WatchEvent, any Error> {
        watch(.storeUID(uid), sinceVersion: sinceVersion)
    }

    /// The blocking form: calls `onEvent` with every frame of the watch on
    /// the calling thread until it returns false (the watch is then
    /// cancelled and this returns), `isStopped` returns true, or an error
    /// that reconnecting cannot mend is thrown.
    public func watch(_ selector: StoreSelector, sinceVersion: UInt64 = 0, reconnect: Bool = true,
                      isStopped: @escaping () -> Bool = { false },
                      onEvent: (WatchEvent) -> Bool) throws(GroserError) {
        var since = sinceVersion
        var backoff: UInt64 = 100_000_000
        while !isStopped() {
            let socket: Socket
            do {
                socket = try openSocket()
            } catch {
                guard reconnect else { throw error }
                Self.pause(backoff, isStopped)
                backoff = min(backoff * 2, 5_000_000_000)
                continue
            }
            defer { socket.close() }
            do {
                var delivered = false
                let keepGoing = try stream(on: socket, selector, since: since, isStopped: isStopped) { event in
                    since = event.storeVersion
                    delivered = true
                    return onEvent(event)
                }
                if !keepGoing { return }
                if delivered { backoff = 100_000_000 }
            } catch {
                guard reconnect, case .transport = error else { throw error }
            }
            if isStopped() { return }
            Self.pause(backoff, isStopped)
            backoff = min(backoff * 2, 5_000_000_000)
        }
    }

    private static func pause(_ nanoseconds: UInt64, _ isStopped: () -> Bool) {
        let until = monotonicNanoseconds() + nanoseconds
        while !isStopped() && monotonicNanoseconds() < until { usleep(50_000) }
    }

    /// One connection's watch. Returns false when `onEvent` asked to stop
    /// (the watch was cancelled), true when stopped from outside.
    private func stream(on socket: Socket, _ selector: StoreSelector, since: UInt64, isStopped: () -> Bool,
                        onEvent: (WatchEvent) -> Bool) throws(GroserError) -> Bool {
        let watchID: UInt64 = 1
        trace?(CallTrace(socketPath: socketPath, requestID: watchID, deadlineMilliseconds: 0, elapsedNanoseconds: nil, outcome: .success(.ok)))
        try sendAll(Framing.frame(Request(id: watchID, method: .watch(selector: selector, sinceVersion: since)).encoded()), socket)
        var decoder = FrameDecoder(maximumFrameBytes: 64 * 1024 * 1024)
        while true {
            let body: [UInt8]
            do {
                guard let next = try decoder.next() else {
                    if isStopped() { return true }
                    try receiveSome(into: &decoder, socket)
                    continue
                }
                body = Array(next)
            } catch let error as GroserError {
                throw error
            } catch {
                throw .transport("the server sent an unreadable frame (\(error))")
            }
            guard let response = try? Response.decode(body) else {
                throw .transport("the server sent a frame that is not a groser.v1.Response")
            }
            if response.id == 0 && !response.status.isOK { throw .transport("groserd ended the connection: \(response.status.message)") }
            guard response.id == watchID else { continue }
            guard response.status.isOK else { throw .server(response.status) }
            guard case .watch(let event) = response.body else { throw Self.mismatch("Watch") }
            if !onEvent(event) {
                try? sendAll(Framing.frame(Request(id: 2, method: .cancelWatch(watchID: watchID)).encoded()), socket)
                return false
            }
            if !response.continues { throw .transport("the watch ended") }
        }
    }

    private func sendAll(_ frame: [UInt8], _ socket: Socket) throws(GroserError) {
        try send(frame, on: socket, seconds: defaultTimeout, deadline: monotonicNanoseconds() + UInt64(defaultTimeout * 1e9))
    }

    /// Waits up to 250 ms for bytes and reads what came.
    private func receiveSome(into decoder: inout FrameDecoder, _ socket: Socket) throws(GroserError) {
        do {
            try receive(into: &decoder, on: socket, seconds: 0.25, deadline: monotonicNanoseconds() + 250_000_000)
        } catch {
            if case .timedOut = error { return }
            throw error
        }
    }
}

extension GroserClient {
    /// The daemon's counters, latencies and sizes (PROTOCOL.md §7C).
    public func stats(timeout: Double? = nil) throws(GroserError) -> ServerStats {
        guard case .stats(let s) = try call(.stats, timeout: timeout) else { throw Self.mismatch("Stats") }
        return s
    }

    /// The daemon's counters, latencies and sizes (PROTOCOL.md §7C).
    public func stats(timeout: Duration? = nil) async throws(GroserError) -> ServerStats {
        try await answer(.stats, timeout, "Stats") { if case .stats(let v) = $0 { v } else { nil } }
    }
}
