import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// One thread's epoll loop: accepts from the shared listening socket
/// (EventLoop+Accepting), reads every complete frame available on a
/// connection, answers them all through the `Dispatcher` (LoopResponder),
/// and writes the answers with one send. Requests for the workers get their
/// answers back through the inbox (`CommitInbox`), and later answers on the
/// same connection wait behind them, so each connection is answered in order.
final class EventLoop: @unchecked Sendable {
    // @unchecked: after `run` starts, all state below is touched only by the
    // loop's own thread; other threads only call `wake` (an eventfd write)
    // and post to `inbox` (behind its lock).
    private static let listenerToken = UInt64.max
    private static let wakeToken = UInt64.max - 1
    private static let readChunk = 64 * 1024

    let index: Int
    let epoll: Epoll
    private let wakeup: EventFD
    let listener: Socket
    let service: CatalogService
    /// The worker threads the dispatcher sends requests to.
    let workers: Workers
    let config: ServerConfig
    let logger: Logger
    private let stopping: @Sendable () -> Bool
    /// Open connections across all loops, per peer uid and in all.
    let admission: ConnectionAdmission
    /// Bytes in unfinished frames across all loops, for `--max-unfinished-frame-bytes`.
    private let unfinished: UnfinishedFrames
    let handoff: ConnectionHandoff
    let watches: WatchHub
    let counters: DaemonCounters
    /// This loop's watches.
    @exclusivity(unchecked) var fanOut = WatchFanOut()
    /// The largest holding this loop has published to `unfinished` (may be
    /// stale on the high side until the next `enforceBudget`).
    @exclusivity(unchecked) private var publishedLargestHolding = 0
    /// The total went over budget: enforce it once the current event is handled.
    @exclusivity(unchecked) private var budgetCheckDue = false
    // The loop's hot state is touched only by its own thread, so its
    // exclusivity is not checked at run time: each checked access cost about
    // 80 instructions, over 1,000 per request at P=1 (tools/bench-instructions).
    @exclusivity(unchecked) var connections: [Int32: Connection] = [:]
    /// Where every read lands; shared by the loop's connections.
    private let readBuffer: UnsafeMutableRawBufferPointer
    /// Answers being built for one connection before they are written.
    @exclusivity(unchecked) private var output: [UInt8] = []
    /// The connections a turn of answers reached, kept between turns
    /// (an array a turn was an allocation a request at P=1).
    @exclusivity(unchecked) private var touched: [Connection] = []
    private var listening = false
    var acceptPausedUntil: UInt64 = 0
    private var housekeeping = LoopHousekeeping()
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

    func startListening() throws(Errno) {
        guard !listening else { return }
        // EPOLLEXCLUSIVE: one loop wakes per incoming connection, not all.
        try epoll.add(listener.descriptor, events: [.readable, .exclusive], token: Self.listenerToken)
        listening = true
    }

    func stopListening() {
        guard listening else { return }
        epoll.remove(listener.descriptor)
        listening = false
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
                if fanOut.framesUncounted > 0 {
                    counters.watchFrames.add(fanOut.framesUncounted, ordering: .relaxed)
                    fanOut.framesUncounted = 0
                }
            } catch {
                logger.error("loop \(index): epoll_wait failed: \(error)")
                break
            }
            sweepIfDue()
        }
        drainAndClose()
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
            let largest = LoopHousekeeping.largestHolder(connections.values, bytes: \.accountedFrameBytes,
                                                         since: \.machine.unfinishedSince)
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
            cutOff(largest, reason: "unfinished-frame budget",
                   status: LoopHousekeeping.budgetRefusal(limit: unfinished.limit, announced: announced))
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

    /// Moves answers from the commit queue to their connections. A shard
    /// answers a batch's requests in order, so one connection's answers
    /// usually come one after another, next to each other in the shard's
    /// array: they join into one `FrameRun`, written from that array; what
    /// cannot join (an answer made on the loop, another array's) is copied
    /// into the loop's `output` after it, and both are offered to the
    /// socket in one call (`deliver`).
    private func deliverAnswers() {
        let answers = inbox.take()
        guard !answers.isEmpty else { return }
        answerTurn &+= 1
        touched.removeAll(keepingCapacity: true)
        var run: Connection?
        // A connection's answers that follow each other in a worker's
        // array, written from there (`FrameRun`), ahead of `output`.
        var frames: FrameRun?
        // Read in place: `answers[i]` copied each answer (its frame retained
        // and released), twice.
        answers.withUnsafeBufferPointer { answers in
        for i in answers.indices {
            let a = answers.baseAddress! + i
            if let c = run, c.socket.descriptor != a.pointee.address.fd || c.serial != a.pointee.address.serial {
                deliver(c, first: frames.take())
                run = nil
            }
            if run == nil {
                // The connection may have closed, and its descriptor been reused.
                guard let c = connections[a.pointee.address.fd], c.serial == a.pointee.address.serial else { continue }
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
            c.machine.answerArrived(slot: a.pointee.address.slot, frame: a.pointee.frame, into: &out, run: &frames, &responder)
            swap(&out, &output)
            if let status = a.pointee.status, logger.level != .debug {
                counters.record(loop: index, method: a.pointee.address.method, status: status,
                                nanoseconds: monotonicNanoseconds() &- a.pointee.address.receivedAt)
            } else {
                a.pointee.frame.withUnsafeBytes { record(c, a.pointee.address.method, $0, receivedAt: a.pointee.address.receivedAt) }
            }
        }
        }
        if let c = run { deliver(c, first: frames.take()) }
        for i in touched.indices { finishIO(touched[i]) }
        touched.removeAll(keepingCapacity: true)
        inbox.recycle(answers)
    }

    /// Writes the answers in `first` (a worker's answers, from its array)
    /// and then `output` to the connection, in one call, or queues them
    /// behind answers it has not taken yet. What the socket does not take
    /// moves to the connection (copied into its chunks).
    private func deliver(_ connection: Connection, first: FrameRun? = nil) {
        guard !output.isEmpty || first != nil else { return }
        defer {
            output.removeAll(keepingCapacity: output.capacity <= LoopHousekeeping.retainedOutputCapacity)
        }
        let open = connection.machine.mayWriteDirectly
        guard let first else {
            let written = open ? output.withUnsafeBytes { write($0, UnsafeRawBufferPointer(start: nil, count: 0), to: connection).0 } : 0
            connection.machine.keep(&output, written: written, now: monotonicNanoseconds())
            return
        }
        first.withUnsafeBytes { run in output.withUnsafeBytes { rest in
            let (a, b) = open ? write(run, rest, to: connection) : (0, 0)
            let now = monotonicNanoseconds()
            connection.machine.keep(run, written: a, now: now)
            if !rest.isEmpty { connection.machine.keep(rest, written: b, now: now) }
        } }
    }

    /// Offers `a` then `b` to the connection's socket until it takes them
    /// all or would block; returns how many of each it took. (A failed
    /// write is left to `flush`, which fails the same way and closes.)
    private func write(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, to connection: Connection) -> (Int, Int) {
        var (wa, wb) = (0, 0)
        while wa < a.count || wb < b.count {
            switch Result(catching: { () throws(Errno) -> IOResult in
                try connection.socket.write(UnsafeRawBufferPointer(rebasing: a[wa...]), UnsafeRawBufferPointer(rebasing: b[wb...]))
            }) {
            case .success(.processed(let n)):
                let fromA = min(n, a.count - wa)
                wa += fromA
                wb += n - fromA
            case .success(.wouldBlock), .failure: return (wa, wb)
            }
        }
        return (wa, wb)
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
        fanOut.closed(connection, counters: counters)
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
    func record(_ connection: Connection, _ method: MethodField?, _ frame: UnsafeRawBufferPointer, receivedAt: UInt64) {
        let (id, status) = method == .cancelWatch
            ? ResponseFramePeek.lastIDAndStatus(frame) : ResponseFramePeek.idAndStatus(frame)
        let elapsed = monotonicNanoseconds() &- receivedAt
        counters.record(loop: index, method: method, status: status, nanoseconds: elapsed)
        if logger.level == .debug {
            logger.debug("connection #\(connection.serial) request \(id) \(method?.methodName ?? "(unknown)") \(status) \(elapsed / 1000) µs")
        }
    }

    // MARK: Watches

    /// Hands the catalog changes waiting for this loop to its watchers, and
    /// sends the frames their connections can take now.
    private func deliverChanges() {
        let (records, overflowed) = watches.take(for: index)
        guard (!records.isEmpty || overflowed), !fanOut.watching.isEmpty else { return }
        let coalesced = WatchFanOut.deliver(records, reload: overflowed ? service.current : nil, to: fanOut.watching,
                                            send: finishIO)
        if coalesced > 0 { counters.watchCoalesced.add(coalesced, ordering: .relaxed) }
    }

    /// Sends the connection's waiting watch frames, when no answer is owed
    /// before them and its output is not backed up: through the loop's own
    /// buffer straight to the socket when it may write directly (what it
    /// does not take stays with the connection), rather than through a
    /// buffer of the connection's, allocated and freed for every frame.
    private func emitWatchFrames(_ connection: Connection) {
        let direct = connection.machine.mayWriteDirectly
        fanOut.push(connection, direct: &output)
        if direct { deliver(connection) }
    }

    // MARK: Timeouts

    /// Once a second: cuts off clients that stopped reading their answers,
    /// frames that did not arrive in time and, when configured, connections
    /// idle too long; enforces the unfinished-frame budget if a hand-off was
    /// missed.
    private func sweepIfDue() {
        let now = monotonicNanoseconds()
        guard housekeeping.sweepDue(now: now) else { return }
        for connection in Array(connections.values) {
            switch connection.machine.timeout(now: now, watching: !connection.watchers.isEmpty) {
            case nil: break
            case .frameNotFinished(let buffered, let announced):
                let (seconds, status) = LoopHousekeeping.frameTimeout(buffered: buffered, announced: announced,
                                                                      timeoutSeconds: config.frameReadTimeoutSeconds)
                logger.info("loop \(index): connection #\(connection.serial) sent \(buffered) bytes of a frame and not the rest within \(seconds); closing it")
                cutOff(connection, reason: "frame read timeout", status: status)
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
        LoopHousekeeping.trim(&output)
    }

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
