import GroserSystem
import GroserWire
import Synchronization

/// One thread's epoll loop: accepts from the shared listening socket, reads
/// every complete frame available on a connection, answers them all, and
/// writes the answers with one send.
final class EventLoop: @unchecked Sendable {
    // @unchecked: after `run` starts, all state below is touched only by the
    // loop's own thread; other threads only call `wake` (an eventfd write).
    private static let listenerToken = UInt64.max
    private static let wakeToken = UInt64.max - 1
    private static let readChunk = 64 * 1024

    let index: Int
    private let epoll: Epoll
    private let wakeup: EventFD
    private let listener: Socket
    private let service: CatalogService
    private let config: ServerConfig
    private let logger: Logger
    private let stopping: @Sendable () -> Bool
    private let commits: CommitQueue
    private var connections: [Int32: Connection] = [:]
    private var nextSerial: UInt64 = 0
    /// Answers from the commit queue, waiting for this loop's thread.
    private let inbox = Mutex<[(fd: Int32, serial: UInt64, slot: UInt64, frame: [UInt8])]>([])
    /// Awaited answers a connection may have before it is no longer read.
    static let maximumAwaitedAnswers = 256
    private var listening = false
    private var acceptPausedUntil: UInt64 = 0

    init(index: Int, listener: Socket, service: CatalogService, commits: CommitQueue, config: ServerConfig,
         logger: Logger, stopping: @escaping @Sendable () -> Bool) throws(Errno) {
        self.index = index
        self.commits = commits
        self.listener = listener
        self.service = service
        self.config = config
        self.logger = logger
        self.stopping = stopping
        epoll = try Epoll()
        wakeup = try EventFD()
        try epoll.add(wakeup.descriptor, events: .readable, token: Self.wakeToken)
        try startListening()
    }

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
                    case Self.wakeToken:
                        wakeup.drain()
                        deliverAnswers()
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
            nextSerial += 1
            let connection = Connection(socket: socket, peer: try? socket.peerCredentials(), serial: nextSerial,
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
            if !connection.readPaused && !connection.closeAfterFlush && !connection.waitingForAnswers {
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
            var outcome = IOResult.wouldBlock
            var failure: Errno?
            _ = connection.decoder.writeTail(capacity: Self.readChunk) { raw -> Int in
                switch Result(catching: { () throws(Errno) -> IOResult in try socket.read(into: raw) }) {
                case .success(let r): outcome = r
                case .failure(let e): failure = e; return 0
                }
                if case .processed(let n) = outcome { return n }
                return 0
            }
            if let failure {
                logger.debug("loop \(index): read from connection \(socket.descriptor) failed: \(failure)")
                connection.closeAfterFlush = true
                connection.output.removeAll()
                connection.outputOffset = 0
                return
            }
            guard case .processed(let count) = outcome else { break }
            if count == 0 {
                // The peer closed its side: answer what it sent, then close.
                connection.closeAfterFlush = true
                answerFrames(connection, handler)
                return
            }
            answerFrames(connection, handler)
            if connection.closeAfterFlush || connection.waitingForAnswers { return }
            if connection.pendingOutputBytes > config.maximumPendingOutputBytes {
                // The client is not reading its answers: stop reading its
                // requests until they drain.
                connection.readPaused = true
                return
            }
            // A short read means the socket is drained; level-triggered epoll
            // reports it again when more arrives, so skip the EAGAIN read.
            if count < Self.readChunk { return }
        }
    }

    private func answerFrames(_ connection: Connection, _ handler: RequestHandler) {
        let receivedAt = monotonicNanoseconds()
        do {
            while connection.held.count < Self.maximumAwaitedAnswers, let frame = try connection.decoder.next() {
                let handled: RequestHandler.Handled
                if connection.held.isEmpty {
                    handled = frame.withUnsafeBytes { body in
                        handler.respond(toFrame: body, receivedAt: receivedAt, into: &connection.output)
                    }
                } else {
                    // An earlier answer is still awaited: hold this one back.
                    var out: [UInt8] = []
                    handled = frame.withUnsafeBytes { body in
                        handler.respond(toFrame: body, receivedAt: receivedAt, into: &out)
                    }
                    if case .answered = handled {
                        connection.held.append((connection.nextSlot, out))
                        connection.nextSlot += 1
                    }
                }
                if case .deferred(let request) = handled {
                    defer_(request, connection, receivedAt: receivedAt)
                }
            }
            // Too many answers awaited: stop reading until they arrive.
            connection.waitingForAnswers = connection.held.count >= Self.maximumAwaitedAnswers
        } catch {
            switch error {
            case .frameTooLarge(let length, let maximum):
                logger.info("loop \(index): connection \(connection.socket.descriptor) sent a frame of \(length) bytes (maximum \(maximum)); closing it")
                var out: [UInt8] = []
                ResponseFrameWriter.appendStatus(
                    id: 0,
                    status: Status(.resourceExhausted, "The frame of \(length) bytes exceeds the maximum of \(maximum) bytes; the connection will be closed."),
                    to: &out)
                if connection.held.isEmpty {
                    connection.output.append(contentsOf: out)
                } else {
                    connection.held.append((connection.nextSlot, out))
                    connection.nextSlot += 1
                }
                connection.closeAfterFlush = true
            }
        }
    }

    /// Sends a request to the commit queue; its answer returns through the inbox.
    private func defer_(_ request: Request, _ connection: Connection, receivedAt: UInt64) {
        let slot = connection.nextSlot
        connection.nextSlot += 1
        connection.held.append((slot, nil))
        let fd = connection.socket.descriptor
        let serial = connection.serial
        var job = CommerceJob(request: request, caller: Caller(uid: connection.peer?.uid), receivedAt: receivedAt) {
            [self] frame in
            inbox.withLock { $0.append((fd, serial, slot, frame)) }
            wakeup.signal()
        }
        job.connection = connection.token
        if !commits.submit(job) {
            var out: [UInt8] = []
            ResponseFrameWriter.appendStatus(id: request.id, status: Status(.unavailable, "groserd is shutting down."), to: &out)
            connection.fill(slot: slot, frame: out)
        }
    }

    /// Moves answers from the commit queue to their connections.
    private func deliverAnswers() {
        let answers = inbox.withLock { inbox in
            defer { inbox.removeAll() }
            return inbox
        }
        guard !answers.isEmpty else { return }
        var touched: [Int32: Connection] = [:]
        for a in answers {
            // The connection may have closed, and its descriptor been reused.
            guard let c = connections[a.fd], c.serial == a.serial else { continue }
            c.fill(slot: a.slot, frame: a.frame)
            touched[a.fd] = c
        }
        for c in touched.values {
            if c.waitingForAnswers && c.held.count < Self.maximumAwaitedAnswers / 2 && !stopping() {
                // Requests already buffered were not read while waiting.
                answerFrames(c, RequestHandler(catalog: service.current, startedAtNanoseconds: service.startedAt))
            }
            finishIO(c)
        }
    }

    /// Writes pending output, then registers for the events the connection
    /// now needs (or closes it).
    private func finishIO(_ connection: Connection) {
        guard connection.flush() else { return close(connection, reason: "write failed") }
        if connection.closeAfterFlush && connection.pendingOutputBytes == 0 && connection.held.isEmpty {
            return close(connection, reason: "closed")
        }
        if connection.readPaused && connection.pendingOutputBytes <= config.maximumPendingOutputBytes / 2 {
            connection.readPaused = false
        }
        var wanted: EpollEvents = []
        if !connection.readPaused && !connection.closeAfterFlush && !connection.waitingForAnswers {
            wanted.formUnion([.readable, .readHangup])
        }
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
        connection.token.close()
        connection.socket.close()
    }

    /// Shutdown: no new connections; answer every complete request already
    /// received, wait for answers from the commit queue, write them all (for
    /// up to five seconds in all), close.
    private func drainAndClose() {
        stopListening()
        let deadline = monotonicNanoseconds() + 5_000_000_000
        for connection in Array(connections.values) where !connection.readPaused && !connection.closeAfterFlush {
            readAndAnswer(connection)
        }
        while connections.values.contains(where: { !$0.held.isEmpty }) && monotonicNanoseconds() < deadline {
            try? epoll.wait(timeoutMilliseconds: 20) { token, _ in
                if token == Self.wakeToken { wakeup.drain() }
            }
            deliverAnswers()
        }
        for connection in Array(connections.values) {
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
