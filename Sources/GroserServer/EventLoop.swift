import GroserSystem
import GroserWire

/// One thread's epoll loop: accepts from the shared listening socket, reads
/// every complete frame available on a connection, answers them all, and
/// writes the answers with one send.
final class EventLoop: @unchecked Sendable {
    // @unchecked: after `run` starts, all state below is touched only by the
    // loop's own thread; other threads only call `wake` (an eventfd write).
    private static let listenerToken = UInt64.max
    private static let wakeToken = UInt64.max - 1
    private static let readChunk = 64 * 1024
    /// The loop keeps an output buffer up to this size between reads.
    private static let retainedOutputCapacity = 4 * 1024 * 1024

    let index: Int
    private let epoll: Epoll
    private let wakeup: EventFD
    private let listener: Socket
    private let service: CatalogService
    private let config: ServerConfig
    private let logger: Logger
    private let stopping: @Sendable () -> Bool
    // The loop's hot state is touched only by its own thread, so its
    // exclusivity is not checked at run time: each checked access cost about
    // 80 instructions, over 1,000 per request at P=1 (tools/bench-instructions).
    @exclusivity(unchecked) private var connections: [Int32: Connection] = [:]
    /// Where every read lands; shared by the loop's connections.
    private let readBuffer: UnsafeMutableRawBufferPointer
    /// Answers being built for one connection before they are written.
    @exclusivity(unchecked) private var output: [UInt8] = []
    private var listening = false
    private var acceptPausedUntil: UInt64 = 0

    init(index: Int, listener: Socket, service: CatalogService, config: ServerConfig, logger: Logger,
         stopping: @escaping @Sendable () -> Bool) throws(Errno) {
        self.index = index
        self.listener = listener
        self.service = service
        self.config = config
        self.logger = logger
        self.stopping = stopping
        epoll = try Epoll()
        wakeup = try EventFD()
        readBuffer = .allocate(byteCount: Self.readChunk, alignment: 16)
        try epoll.add(wakeup.descriptor, events: .readable, token: Self.wakeToken)
        try startListening()
    }

    deinit { readBuffer.deallocate() }

    /// Wakes the loop from another thread (to notice shutdown).
    func wake() { wakeup.signal() }

    private func startListening() throws(Errno) {
        guard !listening else { return }
        // EPOLLEXCLUSIVE: one loop wakes per incoming connection, not all.
        try epoll.add(listener.descriptor, events: [.readable, .exclusive], token: Self.listenerToken)
        listening = true
    }

    private func stopListening() {
        guard listening else { return }
        epoll.remove(listener.descriptor)
        listening = false
    }

    /// Runs until the server stops; then answers what was read, flushes and closes.
    func run() {
        while !stopping() {
            var timeout: Int32 = -1
            if acceptPausedUntil != 0 {
                let now = monotonicNanoseconds()
                if now >= acceptPausedUntil {
                    acceptPausedUntil = 0
                    try? startListening()
                } else {
                    timeout = Int32((acceptPausedUntil - now) / 1_000_000) + 1
                }
            }
            do {
                try epoll.wait(timeoutMilliseconds: timeout) { token, events in
                    switch token {
                    case Self.listenerToken: acceptAll()
                    case Self.wakeToken: wakeup.drain()
                    default: handleEvents(fd: Int32(truncatingIfNeeded: token), events: events)
                    }
                }
            } catch {
                logger.error("loop \(index): epoll_wait failed: \(error)")
                break
            }
        }
        drainAndClose()
    }

    private func acceptAll() {
        // Bounded, so one loop does not take every connection of a burst.
        for _ in 0..<64 {
            let accepted: Socket?
            do {
                accepted = try listener.accept()
            } catch {
                if error == .tooManyOpenFiles || error == .tooManyOpenFilesInSystem {
                    // Out of descriptors: stop polling the listener for a
                    // moment, or level-triggered epoll would spin on it.
                    logger.warning("loop \(index): cannot accept: \(error); pausing accepts for 100 ms")
                    stopListening()
                    acceptPausedUntil = monotonicNanoseconds() + 100_000_000
                } else {
                    logger.warning("loop \(index): accept failed: \(error)")
                }
                return
            }
            guard let socket = accepted else { return }
            let connection = Connection(socket: socket, peer: try? socket.peerCredentials(),
                                        maximumFrameBytes: config.maximumFrameBytes)
            do {
                try epoll.add(socket.descriptor, events: [.readable, .readHangup], token: UInt64(socket.descriptor))
            } catch {
                logger.warning("loop \(index): cannot watch a new connection: \(error)")
                socket.close()
                continue
            }
            connections[socket.descriptor] = connection
            logger.debug("loop \(index): connection \(socket.descriptor) from pid \(connection.peer?.pid ?? -1) uid \(connection.peer?.uid ?? 0)")
        }
    }

    private func handleEvents(fd: Int32, events: EpollEvents) {
        guard let connection = connections[fd] else { return }
        if events.contains(.writable) {
            guard connection.flush() else { return close(connection, reason: "write failed") }
        }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.readHangup) || events.contains(.error) {
            if !connection.readPaused && !connection.closeAfterFlush {
                readAndAnswer(connection)
            } else if events.contains(.error) || events.contains(.hangup) {
                return close(connection, reason: "peer gone")
            }
        }
        finishIO(connection)
    }

    /// Reads until the socket is drained, answering every complete frame.
    private func readAndAnswer(_ connection: Connection) {
        let handler = RequestHandler(catalog: service.current, startedAtNanoseconds: service.startedAt)
        let socket = connection.socket
        while true {
            let outcome: IOResult
            do {
                outcome = try socket.read(into: readBuffer)
            } catch {
                logger.debug("loop \(index): read from connection \(socket.descriptor) failed: \(error)")
                connection.closeAfterFlush = true
                connection.output = []
                connection.outputOffset = 0
                return
            }
            guard case .processed(let count) = outcome else { break }
            if count == 0 {
                // The peer closed its side: every whole frame it sent is
                // answered already; close once the answers are written.
                connection.closeAfterFlush = true
                return
            }
            answerFrames(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]), handler)
            deliver(connection)
            if connection.closeAfterFlush { return }
            if connection.pendingOutputBytes > config.maximumPendingOutputBytes {
                // The client is not reading its answers: stop reading its
                // requests until they drain.
                connection.readPaused = true
                return
            }
            // A short read means the socket is drained; level-triggered epoll
            // reports it again when more arrives, so skip the EAGAIN read.
            if count < readBuffer.count { return }
        }
    }

    /// Answers every whole frame of `bytes` (just read) into `output`. Frames
    /// are answered straight from the read buffer; only an unfinished frame
    /// is copied into the connection's decoder, to be completed by later reads.
    private func answerFrames(_ connection: Connection, _ bytes: UnsafeRawBufferPointer, _ handler: RequestHandler) {
        let receivedAt = monotonicNanoseconds()
        // A local buffer: appending to a property of this class through
        // `inout` costs a dynamic exclusivity check per answer.
        var out: [UInt8] = []
        swap(&out, &output)
        defer { swap(&out, &output) }
        do {
            if connection.decoder.bufferedByteCount > 0 {
                connection.decoder.append(bytes)
                while let frame = try connection.decoder.next() {
                    frame.withUnsafeBytes { body in answer(body, handler, receivedAt, into: &out) }
                }
                connection.decoder.releaseStorageIfEmpty()
                return
            }
            var rest = bytes
            while let (body, byteCount) = try Framing.firstFrame(in: rest, maximumFrameBytes: config.maximumFrameBytes) {
                answer(body, handler, receivedAt, into: &out)
                rest = UnsafeRawBufferPointer(rebasing: rest[byteCount...])
            }
            connection.decoder.append(rest)
        } catch {
            switch error {
            case .frameTooLarge(let length, let maximum):
                logger.info("loop \(index): connection \(connection.socket.descriptor) sent a frame of \(length) bytes (maximum \(maximum)); closing it")
                ResponseFrameWriter.appendStatus(
                    id: 0,
                    status: Status(.resourceExhausted, "The frame of \(length) bytes exceeds the maximum of \(maximum) bytes; the connection will be closed."),
                    to: &out)
                connection.closeAfterFlush = true
            }
        }
    }

    /// Answers one frame into `output`. The common methods are read without
    /// protobuf-c, whose unpack allocates every message and string; anything
    /// else (or anything odd) goes through protobuf-c.
    @inline(__always)
    private func answer(_ body: UnsafeRawBufferPointer, _ handler: RequestHandler, _ receivedAt: UInt64,
                        into out: inout [UInt8]) {
        if let request = Request.decodeCommonMethod(body) {
            handler.respond(to: request, receivedAt: receivedAt, into: &out)
        } else {
            handler.respond(toFrame: body, receivedAt: receivedAt, into: &out)
        }
    }

    /// Writes the answers in `output` to the connection, or queues them
    /// behind answers it has not taken yet. What the socket does not take
    /// moves to the connection (its buffer swapped in, not copied).
    private func deliver(_ connection: Connection) {
        guard !output.isEmpty else { return }
        defer {
            output.removeAll(keepingCapacity: output.capacity <= Self.retainedOutputCapacity)
        }
        guard connection.pendingOutputBytes == 0 else {
            connection.output.append(contentsOf: output)
            return
        }
        var written = 0
        write: while written < output.count {
            let result = output.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in
                    try connection.socket.write(UnsafeRawBufferPointer(rebasing: raw[written...]))
                }
            }
            switch result {
            case .success(.processed(let n)): written += n
            // A failed write is left to `flush`, which fails the same way and closes.
            case .success(.wouldBlock), .failure: break write
            }
        }
        if written < output.count {
            swap(&connection.output, &output)
            connection.outputOffset = written
        }
    }

    /// Writes pending output, then registers for the events the connection
    /// now needs (or closes it).
    private func finishIO(_ connection: Connection) {
        guard connection.flush() else { return close(connection, reason: "write failed") }
        if connection.closeAfterFlush && connection.pendingOutputBytes == 0 {
            return close(connection, reason: "closed")
        }
        if connection.readPaused && connection.pendingOutputBytes <= config.maximumPendingOutputBytes / 2 {
            connection.readPaused = false
        }
        var wanted: EpollEvents = []
        if !connection.readPaused && !connection.closeAfterFlush { wanted.formUnion([.readable, .readHangup]) }
        if connection.pendingOutputBytes > 0 { wanted.insert(.writable) }
        if wanted != connection.registered {
            do {
                try epoll.modify(connection.socket.descriptor, events: wanted, token: UInt64(connection.socket.descriptor))
                connection.registered = wanted
            } catch {
                close(connection, reason: "epoll_ctl failed: \(error)")
            }
        }
    }

    private func close(_ connection: Connection, reason: @autoclosure () -> String) {
        let fd = connection.socket.descriptor
        logger.debug("loop \(index): connection \(fd) \(reason())")
        epoll.remove(fd)
        connections[fd] = nil
        connection.socket.close()
    }

    /// Shutdown: no new connections; answer every complete request already
    /// received, write the answers (for up to two seconds), close.
    private func drainAndClose() {
        stopListening()
        let deadline = monotonicNanoseconds() + 2_000_000_000
        for connection in Array(connections.values) {
            if !connection.readPaused && !connection.closeAfterFlush { readAndAnswer(connection) }
            while connection.pendingOutputBytes > 0 {
                guard connection.flush() else { break }
                let now = monotonicNanoseconds()
                if connection.pendingOutputBytes == 0 || now >= deadline { break }
                _ = try? connection.socket.poll(forWriting: true, timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
            }
            close(connection, reason: "closed at shutdown")
        }
    }
}
