import GroserSystem

/// One connection to groserd carrying many requests at once (PROTOCOL.md
/// §3): callers write their frames, one reader thread reads every answer
/// and hands each to the call whose id it carries, in whatever order the
/// answers come. A call that times out or whose task is cancelled stops
/// waiting at once; its answer, if it still comes, is dropped.
final class PipelinedConnection: @unchecked Sendable {
    // @unchecked: `socket`, `epoll` and `wake` are set in init and never
    // replaced; the socket is written only under `writer`, read only by
    // the reader thread, and closed by that thread under `writer`; the rest
    // is behind `state`.

    /// Where a call's answer goes: the task waiting for it, once it waits.
    private final class Pending: @unchecked Sendable {
        // @unchecked: both fields are read and written under `state`'s lock.
        var continuation: CheckedContinuation<Result<Response, GroserError>, Never>?
        var result: Result<Response, GroserError>?
        let deadline: UInt64
        let seconds: Double
        init(deadline: UInt64, seconds: Double) {
            self.deadline = deadline
            self.seconds = seconds
        }
    }

    private struct State {
        var pending: [UInt64: Pending] = [:]
        var nextID: UInt64 = 1
        /// Why the connection can carry no more calls, once it cannot.
        var failure: GroserError?
        /// Answers read so far: a connection that has answered before may
        /// have been closed by a daemon restart since (the retry rule).
        var answers = 0
        /// The earliest deadline the reader thread is waiting for.
        var readerDeadline: UInt64 = .max
    }

    private let state = Locked(State())
    /// True once the socket is closed; held while a frame is written.
    private let writer = Locked(false)
    private let socket: Socket
    private let epoll: Epoll
    private let wake: EventFD
    private static let socketToken: UInt64 = 1, wakeToken: UInt64 = 2

    /// Takes `socket` (connected, non-blocking) and starts its reader thread.
    init(socket: Socket) throws(GroserError) {
        self.socket = socket
        do {
            epoll = try Epoll(maxEvents: 4)
            wake = try EventFD()
            try epoll.add(socket.descriptor, events: [.readable, .readHangup], token: Self.socketToken)
            try epoll.add(wake.descriptor, events: .readable, token: Self.wakeToken)
        } catch {
            socket.close()
            throw .transport("cannot watch the connection: \(error)")
        }
        do {
            // The thread holds the connection until the socket ends.
            try OSThread(name: "groser-client") { [self] in readAnswers() }.detach()
        } catch {
            socket.close()
            throw .transport("cannot start the connection's reader thread: \(error)")
        }
    }

    /// Calls waiting for an answer.
    var inFlight: Int { state.withLock { $0.pending.count } }
    /// False once the connection broke or was closed.
    var isOpen: Bool { state.withLock { $0.failure == nil } }
    /// True once it has answered a call.
    var hasAnswered: Bool { state.withLock { $0.answers > 0 } }

    /// Sends `method` and waits for its answer, at most `seconds`; a
    /// cancelled task stops waiting with `.cancelled`.
    func call(_ method: RequestMethod, seconds: Double) async -> Result<Response, GroserError> {
        let deadline = monotonicNanoseconds() &+ UInt64(max(0, min(seconds, 1e9)) * 1e9)
        let pending = Pending(deadline: deadline, seconds: seconds)
        let (id, refused, wakeReader) = state.withLock { s -> (UInt64, GroserError?, Bool) in
            if let failure = s.failure { return (0, failure, false) }
            let id = s.nextID
            s.nextID &+= 1
            s.pending[id] = pending
            let earlier = deadline < s.readerDeadline
            if earlier { s.readerDeadline = deadline }
            return (id, nil, earlier)
        }
        if let refused { return .failure(refused) }
        if wakeReader { wake.signal() }
        let budget = GroserClient.deadlineBudget(seconds)
        let frame = Framing.frame(Request(id: id, deadlineMilliseconds: budget, method: method).encoded())
        let sent = writer.withLock { closed -> GroserError? in
            if closed { return .transport("the connection is closed") }
            return Result { () throws(GroserError) in
                try GroserClient.sendFrame(frame, on: socket, seconds: seconds, deadline: deadline)
            }.failure
        }
        if let sent {
            // Half a frame may have gone: nothing more can be sent on this stream.
            close(because: sent)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { _ -> Result<Response, GroserError>? in
                    if let r = pending.result { return r }
                    pending.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish(id, .failure(.cancelled))
        }
    }

    /// Ends the connection: calls in flight fail with `reason`.
    func close(because reason: GroserError = .transport("the client closed the connection")) {
        state.withLock { if $0.failure == nil { $0.failure = reason } }
        writer.withLock { closed in if !closed { socket.shutdown() } }
    }

    /// Hands call `id` its result, once: to its waiting task, or kept
    /// until the task waits.
    private func finish(_ id: UInt64, _ result: Result<Response, GroserError>) {
        let waiting = state.withLock { s -> CheckedContinuation<Result<Response, GroserError>, Never>? in
            guard let p = s.pending.removeValue(forKey: id) else { return nil }
            if let c = p.continuation {
                p.continuation = nil
                return c
            }
            p.result = result
            return nil
        }
        waiting?.resume(returning: result)
    }

    // MARK: The reader thread

    private func readAnswers() {
        var decoder = FrameDecoder(maximumFrameBytes: 256 * 1024 * 1024)
        var failure: GroserError?
        reading: while true {
            let timeout = expireCalls()
            var readable = false
            do {
                try epoll.wait(timeoutMilliseconds: timeout) { token, _ in
                    if token == Self.socketToken { readable = true } else { wake.drain() }
                }
            } catch {
                failure = .transport("cannot wait for answers: \(error)")
                break
            }
            guard readable else { continue }
            while true {
                let outcome: IOResult
                do { outcome = try socket.read(into: &decoder) } catch {
                    failure = .transport("cannot receive: \(error)")
                    break reading
                }
                guard case .processed(let n) = outcome else { break }
                if n == 0 {
                    failure = .transport("groserd closed the connection")
                    break reading
                }
                do {
                    while let body = try decoder.next() { deliver(body) }
                } catch {
                    failure = .transport("the server sent an unreadable frame (\(error))")
                    break reading
                }
            }
        }
        writer.withLock { closed in
            closed = true
            socket.close()
        }
        let failed = state.withLock { s -> [UInt64] in
            if s.failure == nil { s.failure = failure }
            return Array(s.pending.keys)
        }
        let reason = state.withLock { $0.failure } ?? .transport("the connection ended")
        for id in failed { finish(id, .failure(reason)) }
    }

    /// Gives an answer to its call. Frames of unknown ids (a call that
    /// stopped waiting) and frames sent unasked are dropped.
    private func deliver(_ body: ArraySlice<UInt8>) {
        guard let response = try? Response.decode(body) else { return }
        if response.continues { return }
        var id = response.id
        if id == 0 {
            // An error about a frame the server could not read: ours are
            // well formed, so it can only be the oldest call's.
            guard !response.status.isOK, let oldest = state.withLock({ $0.pending.keys.min() }) else { return }
            id = oldest
        }
        state.withLock { $0.answers += 1 }
        finish(id, .success(response))
    }

    /// Fails the calls whose deadline passed; the milliseconds until the
    /// next deadline, or -1 when no call is waiting.
    private func expireCalls() -> Int32 {
        let now = monotonicNanoseconds()
        let (expired, next) = state.withLock { s -> ([(UInt64, Double)], UInt64) in
            var expired: [(UInt64, Double)] = []
            var next = UInt64.max
            for (id, p) in s.pending {
                if p.deadline <= now { expired.append((id, p.seconds)) } else { next = min(next, p.deadline) }
            }
            s.readerDeadline = next
            return (expired, next)
        }
        for (id, seconds) in expired { finish(id, .failure(.timedOut(seconds: seconds))) }
        guard next != .max else { return -1 }
        return Int32(clamping: (next - now) / 1_000_000 + 1)
    }
}

extension Result {
    /// The error, when this is one.
    var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
