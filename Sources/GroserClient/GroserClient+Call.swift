import GroserSystem

/// Calls of any method with a request built at run time (groser-client's
/// `call`, grpcurl-style): the body is a `ProtoMessage` read from JSON
/// through the descriptors, and the answer comes back the same way, so a
/// method needs no typed wrapper to be called.
extension GroserClient {
    /// Sends `body` as the request of `method` and returns the answer as it
    /// came. A refusal is not thrown: it is the answer's `status`, for the
    /// caller to print as it prints bodies. Resent once on a new connection
    /// after a transport failure only when the method table says a resend
    /// is safe.
    public func call(_ method: MethodField, body: ProtoMessage, timeout: Double? = nil) throws(GroserError) -> ProtoAnswer {
        let (_, bytes) = try roundTrip(safeToRetry: method.info.retry == .safe, timeout: timeout ?? defaultTimeout) { id, budget in
            ProtoMessage.request(id: id, deadlineMilliseconds: budget, method: method, body: body)
        }
        do {
            return try ProtoAnswer(bytes)
        } catch {
            throw .transport("the server sent a frame that is not a groser.v1.Response")
        }
    }

    /// Sends `body` as the request of a streaming method (Watch) on a
    /// connection of its own and calls `onFrame` with every frame of the
    /// answer, until a frame without `continues` (the stream's end, or a
    /// refusal), `onFrame` returning false, or `isStopped` returning true
    /// (checked every 250 ms). The connection is closed at the end, which
    /// ends the stream on the server too. No deadline: a watch lasts.
    public func callStreaming(_ method: MethodField, body: ProtoMessage, isStopped: () -> Bool = { false },
                              onFrame: (ProtoAnswer) -> Bool) throws(GroserError) {
        let socket = try openSocket()
        defer { socket.close() }
        let id: UInt64 = 1
        trace?(CallTrace(socketPath: socketPath, requestID: id, deadlineMilliseconds: 0, elapsedNanoseconds: nil, outcome: .success(.ok)))
        let request = Framing.frame(ProtoMessage.request(id: id, deadlineMilliseconds: 0, method: method, body: body))
        try send(request, on: socket, seconds: defaultTimeout, deadline: monotonicNanoseconds() + UInt64(defaultTimeout * 1e9))
        var decoder = FrameDecoder(maximumFrameBytes: 256 * 1024 * 1024)
        while !isStopped() {
            let frame: [UInt8]
            do {
                guard let next = try decoder.next() else {
                    try receiveAWhile(into: &decoder, socket)
                    continue
                }
                frame = Array(next)
            } catch let error as GroserError {
                throw error
            } catch {
                throw .transport("the server sent an unreadable frame (\(error))")
            }
            let answer: ProtoAnswer
            do { answer = try ProtoAnswer(frame) } catch {
                throw .transport("the server sent a frame that is not a groser.v1.Response")
            }
            // id 0 with an error: the server could not read the request, or
            // is closing the connection; either ends this stream.
            guard answer.id == id || (answer.id == 0 && !answer.status.isOK) else { continue }
            if !onFrame(answer) || !answer.continues { return }
        }
    }

    /// Waits up to 250 ms for bytes and reads what came.
    private func receiveAWhile(into decoder: inout FrameDecoder, _ socket: Socket) throws(GroserError) {
        do {
            try receive(into: &decoder, on: socket, seconds: 0.25, deadline: monotonicNanoseconds() + 250_000_000)
        } catch {
            if case .timedOut = error { return }
            throw error
        }
    }
}
