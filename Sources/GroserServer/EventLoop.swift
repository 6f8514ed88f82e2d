import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// One thread's epoll loop: accepts from the shared listening socket, reads
/// every complete frame available on a connection, answers them all, and
/// writes the answers with one send. Cart requests go to the commit queue;
/// their answers come back through the inbox, and later answers on the same
/// connection wait behind them, so each connection is answered in order.
final class EventLoop: @unchecked Sendable {
    // @unchecked: after `run` starts, all state below is touched only by the
    // loop's own thread; other threads only call `wake` (an eventfd write)
    // and post to `inbox` (behind its lock).
    private static let listenerToken = UInt64.max
    private static let wakeToken = UInt64.max - 1
    private static let readChunk = 64 * 1024
    /// The loop keeps an output buffer up to this size between reads...
    private static let retainedOutputCapacity = 4 * 1024 * 1024
    /// ...and, once a second, no more than this one unless it holds answers.
    private static let idleOutputCapacity = 64 * 1024

    let index: Int
    private let epoll: Epoll
    private let wakeup: EventFD
    private let listener: Socket
    private let service: CatalogService
    /// The worker threads the dispatcher sends requests to.
    let workers: Workers
    private let config: ServerConfig
    private let logger: Logger
    private let stopping: @Sendable () -> Bool
    /// Open connections across all loops, per peer uid and in all.
    private let admission: ConnectionAdmission
    /// Bytes in unfinished frames across all loops, for `--max-unfinished-frame-bytes`.
    private let unfinished: UnfinishedFrames
    private let handoff: ConnectionHandoff
    private let watches: WatchHub
    private let counters: DaemonCounters
    /// Connections with at least one watch.
    @exclusivity(unchecked) private var watching: [Int32: Connection] = [:]
    /// The largest holding this loop has published to `unfinished` (may be
    /// stale on the high side until the next `enforceBudget`).
    @exclusivity(unchecked) private var publishedLargestHolding = 0
    /// The total went over budget: enforce it once the current event is handled.
    @exclusivity(unchecked) private var budgetCheckDue = false
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
    private var lastSweep: UInt64 = 0
    /// Answers from the workers, waiting for this loop's thread.
    let inbox: CommitInbox
    /// Counts `deliverAnswers` turns (see `Connection.answerTurn`).
    @exclusivity(unchecked) private var answerTurn: UInt64 = 0

    init(index: Int, listener: Socket, service: CatalogService, workers: Workers, config: ServerConfig,
         logger: Logger, admission: ConnectionAdmission, unfinished: UnfinishedFrames, handoff: ConnectionHandoff,
         watches: WatchHub, counters: DaemonCounters, stopping: @escaping @Sendable () -> Bool) throws(Errno) {
        self.index = index
        self.listener = listener
        self.service = service
        self.workers = workers
        self.config = config
        self.logger = logger
        self.admission = admission
        self.unfinished = unfinished
        self.handoff = handoff
        self.watches = watches
        self.counters = counters
        self.stopping = stopping
        epoll = try Epoll()
        let wakeup = try EventFD()
        self.wakeup = wakeup
        inbox = CommitInbox(wake: { wakeup.signal() })
        readBuffer = .allocate(byteCount: Self.readChunk, alignment: 16)
        try epoll.add(wakeup.descriptor, events: .readable, token: Self.wakeToken)
        try startListening()
    }

    deinit { readBuffer.deallocate() }

    /// Wakes the loop from another thread (to notice shutdown or answers).
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

    /// What every connection of this daemon may hold and wait for.
    private var connectionLimits: ConnectionStateMachine.Limits {
        ConnectionStateMachine.Limits(
            maximumFrameBytes: config.maximumFrameBytes, maximumPendingOutputBytes: config.maximumPendingOutputBytes,
            watchOutputLimit: Self.watchOutputLimit,
            slowReaderTimeout: UInt64(config.slowReaderTimeoutSeconds * 1e9),
            idleTimeout: UInt64(config.idleTimeoutSeconds * 1e9),
            frameReadTimeout: UInt64(config.frameReadTimeoutSeconds * 1e9))
    }

    /// The dispatcher over the catalog as it is now.
    private var dispatcher: Dispatcher {
        Dispatcher(handler: RequestHandler(catalog: service.current, startedAtNanoseconds: service.startedAt,
                                           maximumAnswerBytes: config.maximumFrameBytes))
    }

    private let turnCount = Atomic<UInt64>(0)
    /// How many times the loop has gone round (read by the watchdog).
    var turns: UInt64 { turnCount.load(ordering: .relaxed) }

    /// Runs until the server stops; then answers what was read, flushes and closes.
    func run() {
        while !stopping() {
            turnCount.add(1, ordering: .relaxed)
            let now = monotonicNanoseconds()
            // Wake at least once a second while there are connections, to
            // cut off stalled readers and idle connections.
            var timeout: Int32 = connections.isEmpty ? -1 : 1000
            if acceptPausedUntil != 0 {
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
                        for (socket, peer) in handoff.take(for: index) { adopt(socket, peer) }
                        if unfinished.takeCheckRequest(loop: index) { budgetCheckDue = true }
                        deliverAnswers()
                        deliverChanges()
                    default: handleEvents(fd: Int32(truncatingIfNeeded: token), events: events)
                    }
                    // Between events, so no connection is closed while in use.
                    if budgetCheckDue { enforceBudget() }
                }
                if watchFramesUncounted > 0 {
                    counters.watchFrames.add(watchFramesUncounted, ordering: .relaxed)
                    watchFramesUncounted = 0
                }
            } catch {
                logger.error("loop \(index): epoll_wait failed: \(error)")
                break
            }
            sweepIfDue()
        }
        drainAndClose()
    }

    // MARK: Accepting

    private func acceptAll() {
        // Bounded, so one loop does not spend a whole burst accepting; the
        // connections go round robin to every loop (ConnectionHandoff).
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
            let peer = try? socket.peerCredentials()
            if let refusal = admission.admit(peer) {
                refuse(socket, refusal)
                continue
            }
            let owner = handoff.nextLoop()
            if owner != index {
                handoff.give(socket, peer, to: owner)
                continue
            }
            adopt(socket, peer)
        }
    }

    /// Starts serving an accepted connection on this loop.
    private func adopt(_ socket: Socket, _ peer: PeerCredentials?) {
        let serial = counters.nextConnectionID.add(1, ordering: .relaxed).newValue
        counters.connectionsAccepted.add(1, ordering: .relaxed)
        let connection = Connection(socket: socket, peer: peer, serial: serial,
                                    limits: connectionLimits, now: monotonicNanoseconds())
        do {
            try epoll.add(socket.descriptor, events: [.readable, .readHangup], token: UInt64(socket.descriptor))
        } catch {
            logger.warning("loop \(index): cannot watch a new connection: \(error)")
            admission.release(peer)
            socket.close()
            return
        }
        connections[socket.descriptor] = connection
        logger.debug("loop \(index): connection #\(serial) from pid \(connection.peer?.pid ?? -1) uid \(connection.peer?.uid ?? 0)")
    }

    /// Over a limit (`PeerConnectionLimits`): one frame with its status
    /// (if the socket takes it at once), then close.
    private func refuse(_ socket: Socket, _ status: Status) {
        var frame: [UInt8] = []
        ResponseFrameWriter.appendStatus(id: 0, status: status, to: &frame)
        _ = frame.withUnsafeBytes { try? socket.write($0) }
        socket.close()
        guard let skipped = admission.refusalLogLine(now: monotonicNanoseconds()) else { return }
        logger.warning("loop \(index): refused a connection: \(status.message)\(skipped > 0 ? " (\(skipped) more refused since the last such line)" : "")")
    }

    // MARK: Reading and answering

    private func handleEvents(fd: Int32, events: EpollEvents) {
        guard let connection = connections[fd] else { return }
        if events.contains(.writable) {
            guard connection.flush(now: monotonicNanoseconds()) else { return close(connection, reason: "write failed") }
        }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.readHangup) || events.contains(.error) {
            if connection.machine.isReading {
                readAndAnswer(connection)
            } else if events.contains(.error) || events.contains(.hangup) {
                return close(connection, reason: "peer gone")
            }
        }
        finishIO(connection)
    }

    /// Reads until the socket is drained, answering every complete frame.
    private func readAndAnswer(_ connection: Connection) {
        let dispatcher = self.dispatcher
        let socket = connection.socket
        while true {
            let outcome: IOResult
            do {
                outcome = try socket.read(into: readBuffer)
            } catch {
                logger.debug("loop \(index): read from connection #\(connection.serial) failed: \(error)")
                connection.machine.readFailed()
                return
            }
            guard case .processed(let count) = outcome else { break }
            if count == 0 {
                connection.machine.peerClosed()
                return
            }
            answerFrames(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]), dispatcher)
            deliver(connection)
            // Over the unfinished-frame budget: stop reading here, so it is
            // enforced before this connection grows by another read (epoll
            // reports the rest again).
            if !connection.machine.isReading || budgetCheckDue { return }
            // A short read means the socket is drained; level-triggered epoll
            // reports it again when more arrives, so skip the EAGAIN read.
            if count < readBuffer.count { return }
        }
    }

    /// Hands `bytes` (just read; empty after a resume) to the connection's
    /// machine, which answers what may be answered now into `output`, and
    /// brings the frame budget up to date.
    private func answerFrames(_ connection: Connection, _ bytes: UnsafeRawBufferPointer, _ dispatcher: Dispatcher) {
        // A local buffer: appending to a property of this class through
        // `inout` costs a dynamic exclusivity check per answer.
        var out: [UInt8] = []
        swap(&out, &output)
        var responder = LoopResponder(loop: self, connection: connection, dispatcher: dispatcher)
        let failure = connection.machine.bytesArrived(bytes, now: monotonicNanoseconds(), into: &out, &responder)
        swap(&out, &output)
        if connection.machine.decoder.storageByteCount != connection.accountedFrameBytes { account(connection) }
        if case .frameTooLarge(let length, let maximum) = failure {
            logger.info("loop \(index): connection #\(connection.serial) sent a frame of \(length) bytes (maximum \(maximum)); closing it")
        }
    }

    /// Brings the shared total up to date with the connection's decoder; a
    /// growth that takes the total over budget schedules `enforceBudget`.
    private func account(_ connection: Connection) {
        let held = connection.machine.decoder.storageByteCount
        let delta = held - connection.accountedFrameBytes
        guard delta != 0 else { return }
        connection.accountedFrameBytes = held
        let total = unfinished.add(delta)
        if held > publishedLargestHolding {
            publishedLargestHolding = held
            unfinished.publish(largest: held, loop: index)
        }
        if delta > 0 && total > unfinished.limit { budgetCheckDue = true }
    }

    /// While the shared total is over budget: closes this loop's largest
    /// holder, unless another loop has published a larger one, which is then
    /// asked to check instead (see `UnfinishedFrames`).
    private func enforceBudget() {
        budgetCheckDue = false
        while unfinished.bytes > unfinished.limit {
            // Among equal holdings, the frame that began first: a client that
            // stopped sending, rather than one whose frame is still streaming in.
            var largest: Connection?
            for c in connections.values where c.accountedFrameBytes > 0 {
                guard let l = largest else { largest = c; continue }
                if c.accountedFrameBytes > l.accountedFrameBytes
                    || c.accountedFrameBytes == l.accountedFrameBytes && c.machine.unfinishedSince < l.machine.unfinishedSince {
                    largest = c
                }
            }
            let size = largest?.accountedFrameBytes ?? 0
            publishedLargestHolding = size
            unfinished.publish(largest: size, loop: index)
            if let other = unfinished.loop(holdingMoreThan: size, besides: index) {
                unfinished.requestCheck(loop: other)
                return
            }
            guard let largest else { return }
            let announced = largest.machine.decoder.announcedBodyLength
            logger.info("loop \(index): \(unfinished.bytes) bytes are held in unfinished frames (maximum \(unfinished.limit)); closing connection #\(largest.serial), the largest holder (\(size) bytes)")
            cutOff(largest, reason: "unfinished-frame budget", status: Status(
                .resourceExhausted,
                "groserd holds more than its maximum of \(unfinished.limit) bytes in frames still arriving, and this connection's\(announced.map { " frame of \($0) bytes" } ?? " unfinished frame") is the largest; the connection will be closed."))
        }
    }

    /// Drops the connection's unfinished frame (its memory goes back at
    /// once), answers what it owes, then `status` if the socket takes it,
    /// and closes it.
    private func cutOff(_ connection: Connection, reason: String, status: Status) {
        connection.machine.cutOff(status)
        account(connection)
        // The peer may take no more: its status frame then waits at most
        // the slow-reader timeout.
        logger.debug("loop \(index): connection #\(connection.serial) cut off: \(reason)")
        finishIO(connection)
    }

    /// The loop's side of a connection's frames: the dispatcher, and the
    /// executors it sends requests to (the watch code and the stats on this
    /// loop, the workers through the inbox). The machine decides when and
    /// in which order; this answers.
    struct LoopResponder: FrameResponder, Executors {
        // Both outlive every call: the loop owns the connection while it serves it.
        unowned(unsafe) let loop: EventLoop
        unowned(unsafe) let connection: Connection
        let dispatcher: Dispatcher

        /// The common methods are read without protobuf-c, whose unpack
        /// allocates every message and string; anything else goes through it.
        @inline(__always)
        mutating func answer(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let start = out.count
            let answered: ConnectionStateMachine.Answered
            let method: MethodField?
            if let request = Request.decodeCommonMethod(body) {
                method = request.method.field
                answered = dispatcher.dispatch(request, receivedAt: receivedAt, slot: slot, to: self, into: &out)
            } else {
                method = Request.methodField(of: body)
                answered = dispatcher.dispatch(frame: body, receivedAt: receivedAt, slot: slot, peerIsOperator: isOperator,
                                               to: self, into: &out)
            }
            if out.count > start {
                out.withUnsafeBytes { loop.record(connection, method, UnsafeRawBufferPointer(rebasing: $0[start...]), receivedAt: receivedAt) }
            }
            return answered
        }

        mutating func hold(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64) -> ConnectionStateMachine.HeldAnswer {
            var frame: [UInt8] = []
            guard let request = Request.decodeCommonMethod(body)
                    ?? RequestHandler.decode(frame: body, peerIsOperator: isOperator, into: &frame) else { return .ready(frame) }
            return dispatcher.hold(request, receivedAt: receivedAt, slot: slot, to: self)
        }

        /// Asked only for a frame naming an operators' method.
        func isOperator() -> Bool { connection.isOperator(by: loop.admission.isOperator) }

        mutating func answer(held request: Request, receivedAt: UInt64, into out: inout [UInt8]) {
            let start = out.count
            // Held requests are the ones no worker answers: answered now.
            _ = dispatcher.dispatch(request, receivedAt: receivedAt, slot: 0, to: self, into: &out)
            out.withUnsafeBytes { loop.record(connection, request.method.field, UnsafeRawBufferPointer(rebasing: $0[start...]), receivedAt: receivedAt) }
        }

        func answerOnLoop(_ request: Request, into out: inout [UInt8]) { loop.answerLocal(request, connection, into: &out) }

        func runInShard(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                        into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.customers.submit(job(request, receivedAt, slot), sessionKeys: &connection.sessionKeys), id, &out)
        }

        func runInAccountWorkers(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                                 into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.customers.accounts.submit(job(request, receivedAt, slot)), id, &out)
        }

        func runInCommitQueue(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                              into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.commits.submit(job(request, receivedAt, slot)), id, &out)
        }

        func runInImportThread(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                               into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.imports.submit(job(request, receivedAt, slot)), id, &out)
        }

        /// The job that carries `request` to a worker; its answer returns
        /// through the loop's inbox for `slot`. The request is moved, not
        /// copied (a copy of the job, its request's strings, showed in the profile).
        @inline(__always)
        private func job(_ request: consuming Request, _ receivedAt: UInt64, _ slot: UInt64) -> CommerceJob {
            let reply = loop.inbox.reply(fd: connection.socket.descriptor, serial: connection.serial, slot: slot,
                                         method: request.method.field, receivedAt: receivedAt)
            return CommerceJob(request: request, caller: Caller(uid: connection.peer?.uid, gid: connection.peer?.gid),
                               receivedAt: receivedAt, reply: reply, connection: connection.token)
        }

        /// `.awaiting` when a worker took the request; else UNAVAILABLE in
        /// `out`: the worker takes no more (groserd is stopping).
        @inline(__always)
        private func accepted(_ taken: Bool, _ id: UInt64, _ out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            guard taken else {
                ResponseFrameWriter.appendStatus(id: id, status: Status(.unavailable, "groserd is shutting down."), to: &out)
                return .answered
            }
            return .awaiting
        }
    }

    /// Moves answers from the commit queue to their connections. A shard
    /// answers a batch's requests in order, so one connection's answers
    /// usually come in a run: each run goes through the loop's `output`
    /// buffer and is offered to the socket once (as `answerFrames` does),
    /// rather than into a buffer of the connection's own, allocated again
    /// after every write that emptied it.
    private func deliverAnswers() {
        let answers = inbox.take()
        guard !answers.isEmpty else { return }
        answerTurn &+= 1
        var touched: [Connection] = []
        var run: Connection?
        for i in answers.indices {
            let a = answers[i]
            if let c = run, c.socket.descriptor != a.fd || c.serial != a.serial {
                deliver(c)
                run = nil
            }
            if run == nil {
                // The connection may have closed, and its descriptor been reused.
                guard let c = connections[a.fd], c.serial == a.serial else { continue }
                run = c
                if c.answerTurn != answerTurn {
                    c.answerTurn = answerTurn
                    touched.append(c)
                }
            }
            let c = run!
            var out: [UInt8] = []
            swap(&out, &output)
            var responder = LoopResponder(loop: self, connection: c, dispatcher: dispatcher)
            c.machine.answerArrived(slot: a.slot, frame: a.frame, into: &out, &responder)
            swap(&out, &output)
            a.frame.withUnsafeBytes { record(c, a.method, $0, receivedAt: a.receivedAt) }
        }
        if let c = run { deliver(c) }
        for c in touched { finishIO(c) }
        inbox.recycle(answers)
    }

    /// Writes the answers in `output` to the connection, or queues them
    /// behind answers it has not taken yet. What the socket does not take
    /// moves to the connection (its buffer swapped in, not copied).
    private func deliver(_ connection: Connection) {
        guard !output.isEmpty else { return }
        defer {
            output.removeAll(keepingCapacity: output.capacity <= Self.retainedOutputCapacity)
        }
        guard connection.machine.mayWriteDirectly else {
            connection.machine.keep(&output, written: 0, now: monotonicNanoseconds())
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
        connection.machine.keep(&output, written: written, now: monotonicNanoseconds())
    }

    /// Writes pending output, resumes a connection that was waiting, then
    /// registers for the events it now needs (or closes it).
    private func finishIO(_ connection: Connection) {
        if connection.machine.mayPushWatchFrames { emitWatchFrames(connection) }
        guard connection.flush(now: monotonicNanoseconds()) else { return close(connection, reason: "write failed") }
        // A connection that waited answers the frames it read meanwhile,
        // for as long as the socket takes the answers: if they all went out at
        // once, no event would come to resume it.
        while !stopping() && connection.machine.resume(now: monotonicNanoseconds()) {
            let buffered = connection.machine.decoder.bufferedByteCount
            answerFrames(connection, UnsafeRawBufferPointer(start: nil, count: 0), dispatcher)
            deliver(connection)
            guard connection.flush(now: monotonicNanoseconds()) else { return close(connection, reason: "write failed") }
            // Only an unfinished frame left: wait for more bytes.
            if connection.machine.decoder.bufferedByteCount == buffered { break }
        }
        if connection.machine.isDone { return close(connection, reason: "closed") }
        let wanted = connection.wantedEvents
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
        logger.debug("loop \(index): connection #\(connection.serial) \(reason())")
        epoll.remove(fd)
        connections[fd] = nil
        if !connection.watchers.isEmpty {
            watching[fd] = nil
            counters.watchers.subtract(connection.watchers.count, ordering: .relaxed)
            connection.watchers = []
        }
        connection.token.close()
        connection.socket.close()
        admission.release(connection.peer)
        if connection.accountedFrameBytes != 0 {
            _ = unfinished.add(-connection.accountedFrameBytes)
            connection.accountedFrameBytes = 0
        }
    }

    // MARK: Stats

    /// Counts one answer (the frame just written; of a CancelWatch's two,
    /// its own answer, the last) for Stats, and logs it at debug level.
    @inline(__always)
    fileprivate func record(_ connection: Connection, _ method: MethodField?, _ frame: UnsafeRawBufferPointer, receivedAt: UInt64) {
        let (id, status) = method == .cancelWatch
            ? ResponseFramePeek.lastIDAndStatus(frame) : ResponseFramePeek.idAndStatus(frame)
        let elapsed = monotonicNanoseconds() &- receivedAt
        counters.record(loop: index, method: method, status: status, nanoseconds: elapsed)
        if logger.level == .debug {
            logger.debug("connection #\(connection.serial) request \(id) \(method?.methodName ?? "(unknown)") \(status) \(elapsed / 1000) µs")
        }
    }

    private func daemonStats() -> ServerStats {
        let catalog = service.current
        let tally = counters.requests()
        var s = ServerStats()
        s.serverVersion = ProtocolInfo.serverVersion
        s.uptimeMilliseconds = (monotonicNanoseconds() &- service.startedAt) / 1_000_000
        s.connections = UInt64(max(0, admission.openConnections))
        s.connectionsAccepted = UInt64(counters.connectionsAccepted.load(ordering: .relaxed))
        admission.report(into: &s)
        s.connectionsClosedIdle = UInt64(counters.connectionsClosedIdle.load(ordering: .relaxed))
        s.watchers = UInt64(max(0, counters.watchers.load(ordering: .relaxed)))
        s.watchFrames = UInt64(counters.watchFrames.load(ordering: .relaxed))
        s.watchCoalesced = UInt64(counters.watchCoalesced.load(ordering: .relaxed))
        s.watchersCutOff = UInt64(counters.watchersCutOff.load(ordering: .relaxed))
        s.slowReadersCutOff = UInt64(counters.slowReadersCutOff.load(ordering: .relaxed))
        s.methods = tally.methods
        s.errors = tally.errorCounts
        s.catalogVersion = catalog.version
        s.catalogStores = UInt64(catalog.stores.count)
        s.catalogProducts = UInt64(catalog.stores.values.reduce(0) { $0 + $1.productCount })
        if let durability = counters.durability {
            let h = durability.histogram
            s.commitBatches = h.totalCount
            s.fsync = LatencySummary(h)
        }
        let store = counters.store.report
        s.store = store.store
        s.storeState = store.state
        if counters.store.kind == .postgresql { s.storeRoundTrip = LatencySummary(store.roundTrips) }
        s.storeConflicts = store.conflicts
        s.storeReconnects = store.reconnects
        s.residentBytes = UInt64(ProcessInfo.residentKilobytes() ?? 0) * 1024
        s.searchIndexBytes = UInt64(catalog.stores.values.reduce(0) { $0 + $1.searchBytes })
        return s
    }

    // MARK: Watches

    /// A connection with this much output not yet taken gets no more watch
    /// frames: its changes wait, merged, until the output drains.
    static let watchOutputLimit = 64 * 1024

    /// Answers Watch, CancelWatch and Stats, in the connection's answer order.
    fileprivate func answerLocal(_ request: Request, _ connection: Connection, into out: inout [UInt8]) {
        switch request.method {
        case .watch(let selector, let since):
            if WatchRequests.start(id: request.id, selector: selector, since: since, catalog: service.current, hub: watches,
                                   watchers: &connection.watchers, into: &out) {
                watching[connection.socket.descriptor] = connection
                counters.watchers.add(1, ordering: .relaxed)
                counters.watchFrames.add(1, ordering: .relaxed)
            }
        case .cancelWatch(let watchID):
            var end: [UInt8] = []
            var answer: [UInt8] = []
            guard let removed = WatchRequests.cancel(id: request.id, watchID: watchID, watchers: &connection.watchers,
                                                     streamEnd: &end, into: &answer) else {
                out.append(contentsOf: answer)
                return
            }
            if removed.hasPending { connection.machine.watchFrameDropped() }
            counters.watchers.subtract(1, ordering: .relaxed)
            if connection.watchers.isEmpty { watching[connection.socket.descriptor] = nil }
            // The stream's last frame, then the CancelWatch answer.
            out.append(contentsOf: end)
            out.append(contentsOf: answer)
        case .stats:
            ResponseFrameWriter.appendOK(id: request.id, field: .stats, body: BodyEncoder.stats(daemonStats()), to: &out)
        default:
            ResponseFrameWriter.appendStatus(id: request.id, status: Status(.internal, "groserd routed a request to the wrong place."),
                                             to: &out)
        }
    }

    /// Hands the catalog changes waiting for this loop to its watchers, and
    /// sends the frames their connections can take now.
    private func deliverChanges() {
        let (records, overflowed) = watches.take(for: index)
        guard (!records.isEmpty || overflowed), !watching.isEmpty else { return }
        var coalesced = 0
        let catalog = overflowed ? service.current : nil
        for connection in watching.values {
            for i in connection.watchers.indices {
                let had = connection.watchers[i].hasPending
                if let catalog {
                    let store = catalog.stores[connection.watchers[i].storeUID]
                    connection.watchers[i].mustReload(version: store?.version ?? catalog.version, catalogVersion: catalog.version)
                }
                for r in records where r.storeUID == connection.watchers[i].storeUID {
                    if connection.watchers[i].take(r) { coalesced += 1 }
                }
                if !had && connection.watchers[i].hasPending { connection.machine.watchFrameWaiting() }
            }
            if connection.machine.watchesPending > 0 { finishIO(connection) }
        }
        if coalesced > 0 { counters.watchCoalesced.add(coalesced, ordering: .relaxed) }
    }

    /// Appends the connection's waiting watch frames to its output, when no
    /// answer is owed before them and its output is not backed up.
    private func emitWatchFrames(_ connection: Connection) {
        var sent = 0
        let emit = { (output: inout [UInt8]) in
            for i in connection.watchers.indices where connection.watchers[i].hasPending {
                connection.watchers[i].emit(into: &output)
                sent += 1
            }
        }
        if connection.machine.mayWriteDirectly {
            // Nothing owed before them: through the loop's own buffer straight
            // to the socket (what it does not take stays with the connection),
            // rather than into a buffer of the connection's, allocated and
            // freed for every frame of a fan-out.
            connection.machine.pushWatchFrames(into: &output, emit)
            deliver(connection)
        } else {
            connection.machine.pushWatchFrames(emit)
        }
        // Counted once a turn: one shared atomic per frame bounced its cache
        // line between the two loops 1,000 times a fan-out.
        watchFramesUncounted += sent
    }

    /// Watch frames sent since the loop last added them to the counters.
    private var watchFramesUncounted = 0

    // MARK: Timeouts

    /// Once a second: cuts off clients that stopped reading their answers,
    /// frames that did not arrive in time and, when configured, connections
    /// idle too long; enforces the unfinished-frame budget if a hand-off was
    /// missed.
    private func sweepIfDue() {
        let now = monotonicNanoseconds()
        guard now &- lastSweep >= 1_000_000_000 else { return }
        lastSweep = now
        for connection in Array(connections.values) {
            switch connection.machine.timeout(now: now, watching: !connection.watchers.isEmpty) {
            case nil: break
            case .frameNotFinished(let buffered, let announced):
                let timeout = config.frameReadTimeoutSeconds
                let seconds = timeout == timeout.rounded() ? "\(Int(timeout)) s" : "\(timeout) s"
                logger.info("loop \(index): connection #\(connection.serial) sent \(buffered) bytes of a frame and not the rest within \(seconds); closing it")
                let what = announced.map { "The frame of \($0) bytes" } ?? "The frame's header"
                cutOff(connection, reason: "frame read timeout", status: Status(
                    .resourceExhausted,
                    "\(what) did not arrive within \(seconds) of its first byte (\(buffered) bytes came); the connection will be closed."))
            case .notReading(let pending):
                logger.info("loop \(index): connection #\(connection.serial) read none of its \(pending) pending answer bytes for \(Int(config.slowReaderTimeoutSeconds)) s; closing it")
                counters.slowReadersCutOff.add(1, ordering: .relaxed)
                if !connection.watchers.isEmpty { counters.watchersCutOff.add(1, ordering: .relaxed) }
                close(connection, reason: "cut off: not reading")
            case .idle:
                counters.connectionsClosedIdle.add(1, ordering: .relaxed)
                close(connection, reason: "idle for \(Int(config.idleTimeoutSeconds)) s")
            }
        }
        if unfinished.bytes > unfinished.limit { enforceBudget() }
        // The answer buffer keeps its room between reads (up to 4 MiB), but
        // not for good: once a second a large one goes, so that a burst of
        // large answers does not stay resident (it is grown again when needed).
        if output.isEmpty && output.capacity > Self.idleOutputCapacity { output = [] }
        // Owed output lives in heap chunks (OutputChunks); after a burst of
        // it (clients that read slowly, or large answers) the heap keeps the
        // chunks' pages unless they are given back.
        Allocator.returnFreeMemory(ifMoreThan: Self.freeHeapBytesKept)
    }

    /// Freed heap memory kept before the sweep gives it back to the kernel.
    static let freeHeapBytesKept = 1 << 20

    // MARK: Shutdown

    /// Shutdown: no new connections; answer every complete request already
    /// received, wait for answers from the commit queue, write them all (for
    /// up to three seconds in all), close.
    private func drainAndClose() {
        stopListening()
        for (socket, peer) in handoff.take(for: index) {
            admission.release(peer)
            socket.close()
        }
        let deadline = monotonicNanoseconds() + 3_000_000_000
        for connection in Array(connections.values) where connection.machine.isReading {
            readAndAnswer(connection)
        }
        while connections.values.contains(where: { !$0.machine.held.isEmpty }) && monotonicNanoseconds() < deadline {
            try? epoll.wait(timeoutMilliseconds: 20) { token, _ in
                if token == Self.wakeToken { wakeup.drain() }
            }
            deliverAnswers()
        }
        for connection in Array(connections.values) {
            while connection.machine.pendingOutputBytes > 0 {
                guard connection.flush(now: monotonicNanoseconds()) else { break }
                let now = monotonicNanoseconds()
                if connection.machine.pendingOutputBytes == 0 || now >= deadline { break }
                _ = try? connection.socket.poll(forWriting: true, timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
            }
            close(connection, reason: "closed at shutdown")
        }
    }
}
