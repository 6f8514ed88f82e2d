import GroserWire

/// What the event loop asks of whoever answers a connection's frames: the
/// request handler, the commit queue, the watch code. The state machine
/// decides when a frame is answered and in which order answers leave; the
/// responder makes them. A responder never touches the machine it serves.
public protocol FrameResponder {
    /// Answers `body` into `out`; no answer is owed before it. Returns
    /// `.awaiting` when it sent the request on (to the commit queue), whose
    /// answer comes back as `answerArrived(slot:)` with this `slot`.
    mutating func answer(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                         into out: inout [UInt8]) -> ConnectionStateMachine.Answered
    /// `body` arrived while an earlier answer is still owed: what to keep in
    /// its place (`.awaiting` when it sent the request on with `slot`).
    mutating func hold(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64) -> ConnectionStateMachine.HeldAnswer
    /// A request held by `hold` as `.later` has its turn: answer it into `out`.
    mutating func answer(held request: Request, receivedAt: UInt64, into out: inout [UInt8])
}

/// One connection's protocol state as a value, with no socket: framing,
/// the order answers leave in, backpressure, the output not yet taken,
/// when watch frames may be pushed, and the timeouts. The event loop feeds
/// it events (bytes read, the peer's end, bytes written or refused, an
/// awaited answer, the clock) and does what it says: read on or not,
/// write, cut off, close. As postgres-nio's `ConnectionStateMachine`, it
/// does no I/O itself, so its unit tests need no socket, and the fuzz
/// harness runs the same machine.
public struct ConnectionStateMachine {
    public struct Limits: Sendable {
        public var maximumFrameBytes: Int
        /// Owed output above which no more frames are answered (reading
        /// pauses); reading resumes at half of it.
        public var maximumPendingOutputBytes: Int
        /// Awaited answers above which reading pauses; resumes at half.
        public var maximumAwaitedAnswers = 256
        /// Owed output at which watch frames wait (merged) for the output to drain.
        public var watchOutputLimit = 64 * 1024
        /// Nanoseconds: output not taken for this long cuts the client off.
        public var slowReaderTimeout: UInt64
        /// Nanoseconds: a connection owing nothing, doing nothing and
        /// holding no watch for this long is closed; 0: never.
        public var idleTimeout: UInt64 = 0
        /// Nanoseconds a frame may take to arrive from its first byte.
        public var frameReadTimeout: UInt64

        public init(maximumFrameBytes: Int, maximumPendingOutputBytes: Int, maximumAwaitedAnswers: Int = 256,
                    watchOutputLimit: Int = 64 * 1024, slowReaderTimeout: UInt64, idleTimeout: UInt64 = 0,
                    frameReadTimeout: UInt64) {
            self.maximumFrameBytes = maximumFrameBytes
            self.maximumPendingOutputBytes = maximumPendingOutputBytes
            self.maximumAwaitedAnswers = maximumAwaitedAnswers
            self.watchOutputLimit = watchOutputLimit
            self.slowReaderTimeout = slowReaderTimeout
            self.idleTimeout = idleTimeout
            self.frameReadTimeout = frameReadTimeout
        }
    }

    /// What `FrameResponder.answer` did.
    public enum Answered: Sendable { case answered, awaiting }

    /// An answer kept back to keep request order while an earlier request
    /// waits for the commit queue.
    public enum HeldAnswer {
        /// A cart request's answer, still at the commit queue.
        case awaiting
        /// Encoded and ready to go (a worker's answer is a run of the
        /// array its batch's answers were written into).
        case ready(FrameRun)
        /// A catalog request, answered when its turn comes, so it sees any
        /// catalog change an earlier request on this connection made.
        case later(Request, receivedAt: UInt64)
    }

    /// What the clock says must happen to the connection (`timeout(now:watching:)`).
    public enum Timeout: Equatable, Sendable {
        /// A frame began and did not finish in time (bytes come, header's length).
        case frameNotFinished(buffered: Int, announced: Int?)
        /// The client read none of its owed output in time.
        case notReading(pendingBytes: Int)
        /// Nothing owed, nothing done and no watch held, for the idle timeout.
        case idle
    }

    public let limits: Limits
    /// Holds a frame whose rest has not arrived yet (or frames read while
    /// the connection must wait); empty otherwise.
    public private(set) var decoder: FrameDecoder
    /// Encoded frames not yet written.
    public private(set) var output = OutputChunks()
    /// Answers held back behind an awaited one, in request order.
    public var held: ArraySlice<(slot: UInt64, answer: HeldAnswer)> { heldSlots[heldStart...] }
    /// `held`'s storage: the answers released from the front are left
    /// behind `heldStart` (emptied) until the rest are released, or until
    /// they are the larger part (removing them at every release shifted
    /// the rest, about 325 instructions a cart-add at P=16).
    private var heldSlots: [(slot: UInt64, answer: HeldAnswer)] = []
    private var heldStart = 0
    private var heldCount: Int { heldSlots.count - heldStart }
    private var nextSlot: UInt64 = 0
    /// No more reading: the peer closed, or the stream is unusable; close
    /// once the owed answers are written.
    public private(set) var closing = false
    /// Reading paused until owed output drains (backpressure).
    public private(set) var pausedForOutput = false
    /// Reading paused because too many answers are awaited.
    public private(set) var pausedForAnswers = false
    /// When the connection last read or wrote a byte (monotonic ns).
    public private(set) var lastProgress: UInt64
    /// Since when output has waited on a client that does not read (0: none).
    public private(set) var stalledSince: UInt64 = 0
    /// Since when the frame still arriving has been arriving (0: none).
    public private(set) var unfinishedSince: UInt64 = 0
    /// Watches with a frame waiting to be pushed.
    public private(set) var watchesPending = 0

    public init(limits: Limits, now: UInt64) {
        self.limits = limits
        decoder = FrameDecoder(maximumFrameBytes: limits.maximumFrameBytes, initialCapacity: 0)
        lastProgress = now
    }

    public var pendingOutputBytes: Int { output.count }
    /// Whether the loop should read from the socket.
    public var isReading: Bool { !closing && !pausedForOutput && !pausedForAnswers }
    /// Whether the loop should wait for the socket to take more output.
    public var wantsToWrite: Bool { pendingOutputBytes > 0 }
    /// The connection is finished: closing, nothing owed, nothing awaited.
    public var isDone: Bool { closing && pendingOutputBytes == 0 && heldCount == 0 }
    /// Whether answers may be written straight to the socket, skipping `output`.
    public var mayWriteDirectly: Bool { pendingOutputBytes == 0 }

    // MARK: Reading

    /// Event: `bytes` were read (empty: answer what is buffered, after a
    /// resume). Answers every whole frame that may be answered now into
    /// `out` through `responder`, keeping the rest. A frame over the limit
    /// queues RESOURCE_EXHAUSTED (after what is owed) and closes; the error
    /// is returned for the log.
    @inline(__always)
    public mutating func bytesArrived<R: FrameResponder>(_ bytes: UnsafeRawBufferPointer, now: UInt64, into out: inout [UInt8],
                                                 _ responder: inout R) -> FrameError? {
        if !bytes.isEmpty { lastProgress = now }
        var completedAFrame = false
        defer { noteUnfinishedFrame(completedAFrame: completedAFrame, now: now) }
        do {
            if decoder.bufferedByteCount > 0 || !bytes.isEmpty && mustWait(out) {
                decoder.append(bytes)
                while !mustWait(out), let frame = try decoder.next() {
                    frame.withUnsafeBytes { body in answer(body, now, &responder, into: &out) }
                    completedAFrame = true
                }
                decoder.releaseStorageIfEmpty()
                return nil
            }
            var rest = bytes
            while let (body, byteCount) = try Framing.firstFrame(in: rest, maximumFrameBytes: limits.maximumFrameBytes) {
                answer(body, now, &responder, into: &out)
                completedAFrame = true
                rest = UnsafeRawBufferPointer(rebasing: rest[byteCount...])
                if mustWait(out) { break }
            }
            decoder.append(rest)
            return nil
        } catch {
            switch error {
            case .frameTooLarge(let length, let maximum):
                var frame: [UInt8] = []
                ResponseFrameWriter.appendStatus(
                    id: 0,
                    status: Status(.resourceExhausted, "The frame of \(length) bytes exceeds the maximum of \(maximum) bytes; the connection will be closed."),
                    to: &frame)
                if heldCount == 0 { out.append(contentsOf: frame) } else { _ = hold(.ready(FrameRun(frame))) }
                closing = true
            }
            return error
        }
    }

    /// Event: the peer closed its side. Every whole frame it sent is
    /// answered; the connection closes once the answers are written.
    public mutating func peerClosed() { closing = true }

    /// Event: reading failed; nothing more goes out either.
    public mutating func readFailed() {
        closing = true
        output.removeAll()
    }

    @inline(__always)
    private mutating func answer<R: FrameResponder>(_ body: UnsafeRawBufferPointer, _ receivedAt: UInt64, _ responder: inout R,
                                                   into out: inout [UInt8]) {
        if heldCount == 0 {
            if responder.answer(body, receivedAt: receivedAt, slot: nextSlot, into: &out) == .awaiting { _ = hold(.awaiting) }
        } else {
            // An earlier answer is awaited: this one waits its turn.
            _ = hold(responder.hold(body, receivedAt: receivedAt, slot: nextSlot))
        }
    }

    private mutating func hold(_ answer: HeldAnswer) -> UInt64 {
        let slot = nextSlot
        nextSlot += 1
        heldSlots.append((slot, answer))
        return slot
    }

    /// True when no more frames may be answered now: the answers already
    /// owed exceed the output limit, or too many are awaited.
    private mutating func mustWait(_ out: [UInt8]) -> Bool {
        if pendingOutputBytes + out.count > limits.maximumPendingOutputBytes {
            pausedForOutput = true
            return true
        }
        if heldCount >= limits.maximumAwaitedAnswers {
            pausedForAnswers = true
            return true
        }
        return false
    }

    /// When the frame still arriving began (a frame completed in this read
    /// means the unfinished one began in it). Two comparisons for a
    /// connection whose frames arrive whole.
    @inline(__always)
    private mutating func noteUnfinishedFrame(completedAFrame: Bool, now: UInt64) {
        if decoder.bufferedByteCount == 0 {
            unfinishedSince = 0
        } else if completedAFrame || unfinishedSince == 0 {
            unfinishedSince = now
        }
    }

    /// After output drained or an awaited answer came: lifts a pause whose
    /// cause has eased (output at half its limit, awaited answers at half).
    /// Returns true when frames are buffered that may now be answered (the
    /// loop then calls `bytesArrived` with no bytes).
    public mutating func resume(now: UInt64) -> Bool {
        guard !closing else { return false }
        var resumed = false
        if pausedForOutput && pendingOutputBytes <= limits.maximumPendingOutputBytes / 2 {
            pausedForOutput = false
            resumed = true
        }
        if pausedForAnswers && heldCount < limits.maximumAwaitedAnswers / 2 {
            pausedForAnswers = false
            resumed = true
        }
        // The client could not send while it was not read: its unfinished
        // frame's time starts again.
        if resumed && unfinishedSince != 0 { unfinishedSince = now }
        return resumed && decoder.bufferedByteCount > 0
    }

    // MARK: Answers from elsewhere

    /// Event: the answer awaited in `slot` came. Moves every answer now in
    /// order to the output, answering `later` requests as their turn comes.
    public mutating func answerArrived<R: FrameResponder>(slot: UInt64, frame: [UInt8], _ responder: inout R) {
        answerArrived(slot: slot, frame: FrameRun(frame), &responder)
    }

    /// `answerArrived`, the frame a run of a worker's array.
    public mutating func answerArrived<R: FrameResponder>(slot: UInt64, frame: FrameRun, _ responder: inout R) {
        if let i = heldIndex(of: slot) { heldSlots[i].answer = .ready(frame) }
        releaseReadyIntoOutput(&responder)
    }

    /// Event: the awaited answer for `slot` arrived. What is ready in order
    /// from the front goes to `out` when nothing is owed (the loop offers
    /// `out` to the socket: `keep` takes what it does not), else behind
    /// what is owed. `out` holds only this connection's bytes.
    public mutating func answerArrived<R: FrameResponder>(slot: UInt64, frame: [UInt8], into out: inout [UInt8],
                                                          _ responder: inout R) {
        var run: FrameRun?
        answerArrived(slot: slot, frame: FrameRun(frame), into: &out, run: &run, joining: false, &responder)
    }

    /// `answerArrived(slot:frame:into:_:)`, the answers that follow each
    /// other in one worker's array left uncopied: when nothing is owed and
    /// `out` is empty, the first ready answer becomes `run` and those that
    /// follow it in its array join it; the rest are copied into `out`.
    /// What leaves is `run`, then `out` (the loop writes both from where
    /// they are: `keep` takes what the socket does not).
    public mutating func answerArrived<R: FrameResponder>(slot: UInt64, frame: FrameRun, into out: inout [UInt8],
                                                          run: inout FrameRun?, _ responder: inout R) {
        answerArrived(slot: slot, frame: frame, into: &out, run: &run, joining: true, &responder)
    }

    private mutating func answerArrived<R: FrameResponder>(slot: UInt64, frame: FrameRun, into out: inout [UInt8],
                                                           run: inout FrameRun?, joining: Bool, _ responder: inout R) {
        if let i = heldIndex(of: slot) { heldSlots[i].answer = .ready(frame) }
        if pendingOutputBytes > 0 {
            releaseReadyIntoOutput(&responder)
        } else {
            releaseReady(into: &out, run: &run, joining: joining, &responder)
        }
    }

    /// `releaseReady` behind what is owed.
    private mutating func releaseReadyIntoOutput<R: FrameResponder>(_ responder: inout R) {
        var out: [UInt8] = []
        var run: FrameRun?
        releaseReady(into: &out, run: &run, joining: false, &responder)
        output.append(out)
    }

    /// Moves the held answers that are ready, from the front, to `out` (or,
    /// `joining`, to `run` while `out` is empty: see `answerArrived`).
    private mutating func releaseReady<R: FrameResponder>(into out: inout [UInt8], run: inout FrameRun?, joining: Bool,
                                                          _ responder: inout R) {
        while heldStart < heldSlots.count {
            if case .awaiting = heldSlots[heldStart].answer { return }
            // Moved out (its frame or request goes with it), not copied.
            var answer = HeldAnswer.awaiting
            swap(&answer, &heldSlots[heldStart].answer)
            switch consume answer {
            case .awaiting: break
            case .ready(let f):
                if joining && out.isEmpty && run == nil {
                    run = f
                } else if !(joining && out.isEmpty && run!.join(f)) {
                    f.withUnsafeBytes { out.append(contentsOf: $0) }
                }
            case .later(let request, let receivedAt): responder.answer(held: request, receivedAt: receivedAt, into: &out)
            }
            heldStart += 1
            if heldStart == heldSlots.count {
                heldSlots.removeAll(keepingCapacity: true)
                heldStart = 0
                return
            }
            if heldStart >= 64 && heldStart * 2 >= heldSlots.count {
                heldSlots.removeFirst(heldStart)
                heldStart = 0
            }
        }
    }

    /// Where the held answer for `slot` is: slots are held in the order
    /// they were given, one after the other, so it is found by subtraction.
    private func heldIndex(of slot: UInt64) -> Int? {
        guard heldStart < heldSlots.count else { return nil }
        let first = heldSlots[heldStart].slot
        if slot >= first, slot - first < UInt64(heldCount), heldSlots[heldStart + Int(slot - first)].slot == slot {
            return heldStart + Int(slot - first)
        }
        return heldSlots[heldStart...].firstIndex { $0.slot == slot }
    }

    // MARK: Writing

    /// Event: answers in `out` were offered to the socket directly and it
    /// took `written` bytes; the rest is kept, copied. `out` is the caller's
    /// again afterwards (to be emptied, its room kept).
    public mutating func keep(_ out: inout [UInt8], written: Int, now: UInt64) {
        out.withUnsafeBytes { keep($0, written: written, now: now) }
    }

    /// `keep`, for bytes the caller does not own (a worker's `FrameRun`):
    /// what the socket did not take of `bytes` is copied.
    public mutating func keep(_ bytes: UnsafeRawBufferPointer, written: Int, now: UInt64) {
        // Bytes the socket took are progress, as in `wrote`: an answer that
        // waited for a shard restarts the idle clock when it goes out.
        if written > 0 { lastProgress = now }
        guard written < bytes.count else { return }
        if pendingOutputBytes == 0 { stalledSince = now }
        // Copied, in chunks (see OutputChunks): the caller keeps its buffer,
        // and its room, for the next answers.
        output.append(UnsafeRawBufferPointer(rebasing: bytes[written...]))
    }

    /// Event: the socket took `count` bytes of the owed output.
    public mutating func wrote(_ count: Int, now: UInt64) {
        output.consume(count)
        lastProgress = now
        stalledSince = 0
    }

    /// Event: the socket took nothing (it would block).
    public mutating func writeBlocked(now: UInt64) {
        if stalledSince == 0 { stalledSince = now }
    }

    // MARK: Watches

    /// Event: a watch of this connection has a frame to push (a change came).
    public mutating func watchFrameWaiting() { watchesPending += 1 }
    /// Event: a watch with a frame waiting was cancelled.
    public mutating func watchFrameDropped() { watchesPending = max(0, watchesPending - 1) }

    /// Whether pushed frames may go out now: none is waiting, an answer is
    /// owed before them (they never overtake one), the connection is
    /// closing, or its output is backed up (they wait, merged).
    public var mayPushWatchFrames: Bool {
        watchesPending > 0 && heldCount == 0 && !closing && pendingOutputBytes < limits.watchOutputLimit
    }

    /// Appends the waiting watch frames `emit` writes to the output.
    public mutating func pushWatchFrames(_ emit: (inout [UInt8]) -> Void) {
        var out: [UInt8] = []
        emit(&out)
        output.append(out)
        watchesPending = 0
    }

    /// Like `pushWatchFrames(_:)`, into the caller's buffer, when nothing is
    /// owed (`mayWriteDirectly`): the caller writes it to the socket and
    /// hands back what the socket did not take (`keep`).
    public mutating func pushWatchFrames(into out: inout [UInt8], _ emit: (inout [UInt8]) -> Void) {
        emit(&out)
        watchesPending = 0
    }

    // MARK: The clock

    /// What the clock says must happen now, if anything. A connection
    /// `watching` is waiting for changes, not idle: it is never closed for
    /// idleness (a client's watch may see no change for hours).
    public func timeout(now: UInt64, watching: Bool = false) -> Timeout? {
        // (A connection that is not read cannot finish its frame.)
        if unfinishedSince != 0 && !pausedForOutput && !pausedForAnswers && now &- unfinishedSince > limits.frameReadTimeout {
            return .frameNotFinished(buffered: decoder.bufferedByteCount, announced: decoder.announcedBodyLength)
        }
        if stalledSince != 0 && pendingOutputBytes > 0 && now &- stalledSince > limits.slowReaderTimeout {
            return .notReading(pendingBytes: pendingOutputBytes)
        }
        if limits.idleTimeout > 0 && !watching && heldCount == 0 && pendingOutputBytes == 0 && now &- lastProgress > limits.idleTimeout {
            return .idle
        }
        return nil
    }

    /// Event: the connection is cut off (a timeout, the shared frame
    /// budget). Drops its unfinished frame (its memory goes back at once),
    /// and queues `status` after what it owes, unless it was closing anyway.
    public mutating func cutOff(_ status: Status) {
        decoder.removeAll()
        unfinishedSince = 0
        guard !closing else { return }
        var frame: [UInt8] = []
        ResponseFrameWriter.appendStatus(id: 0, status: status, to: &frame)
        if heldCount == 0 { output.append(frame) } else { _ = hold(.ready(FrameRun(frame))) }
        closing = true
    }
}
