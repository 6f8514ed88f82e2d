@testable import GroserServer
import GroserWire
import Testing

/// The connection's protocol state with no socket: events in (bytes read,
/// the peer's end, writes, awaited answers, the clock), decisions out.
@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    /// Answers every request at once with a frame of `padding` bytes of
    /// message, except ids in `awaited`, which it "sends to the commit
    /// queue"; while an answer is owed it holds catalog requests for later.
    struct Responder: FrameResponder {
        var awaited: Set<UInt64> = []
        var padding = 0
        var submitted: [(id: UInt64, slot: UInt64)] = []
        var answeredLater: [UInt64] = []

        func frame(_ id: UInt64) -> [UInt8] {
            var out: [UInt8] = []
            ResponseFrameWriter.appendStatus(id: id, status: Status(.notFound, String(repeating: "x", count: padding)), to: &out)
            return out
        }

        mutating func answer(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let request = try! Request.decode(body)
            if awaited.contains(request.id) {
                submitted.append((request.id, slot))
                return .awaiting
            }
            out += frame(request.id)
            return .answered
        }

        mutating func hold(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64) -> ConnectionStateMachine.HeldAnswer {
            let request = try! Request.decode(body)
            if awaited.contains(request.id) {
                submitted.append((request.id, slot))
                return .awaiting
            }
            return .later(request, receivedAt: receivedAt)
        }

        mutating func answer(held request: Request, receivedAt: UInt64, into out: inout [UInt8]) {
            answeredLater.append(request.id)
            out += frame(request.id)
        }
    }

    static let second: UInt64 = 1_000_000_000

    func machine(maximumFrameBytes: Int = 1024, maximumPendingOutputBytes: Int = 1 << 20, maximumAwaitedAnswers: Int = 256,
                 idleTimeout: UInt64 = 0) -> ConnectionStateMachine {
        ConnectionStateMachine(limits: .init(maximumFrameBytes: maximumFrameBytes, maximumPendingOutputBytes: maximumPendingOutputBytes,
                                             maximumAwaitedAnswers: maximumAwaitedAnswers, slowReaderTimeout: 10 * Self.second,
                                             idleTimeout: idleTimeout, frameReadTimeout: 5 * Self.second),
                               now: 0)
    }

    func requests(_ ids: [UInt64]) -> [UInt8] {
        ids.flatMap { Framing.frame(Request(id: $0, method: .serverInfo).encoded()) }
    }

    /// The ids and statuses of the frames in `bytes`.
    func answers(_ bytes: [UInt8]) -> [(UInt64, StatusCode)] {
        bytes.withUnsafeBytes { raw in
            var rest = raw
            var found: [(UInt64, StatusCode)] = []
            while let f = try? Framing.firstFrame(in: rest, maximumFrameBytes: Int(UInt32.max)), f.byteCount > 0 {
                found.append(ResponseFramePeek.idAndStatus(UnsafeRawBufferPointer(rebasing: rest[..<f.byteCount])))
                rest = UnsafeRawBufferPointer(rebasing: rest[f.byteCount...])
            }
            return found
        }
    }

    func ids(_ bytes: [UInt8]) -> [UInt64] { answers(bytes).map(\.0) }

    @discardableResult
    func feed(_ m: inout ConnectionStateMachine, _ bytes: [UInt8], now: UInt64 = 1, _ r: inout Responder,
              into out: inout [UInt8]) -> FrameError? {
        bytes.withUnsafeBytes { m.bytesArrived($0, now: now, into: &out, &r) }
    }

    @Test func framesSplitAnywhereAreAnsweredOnceEachInOrder() {
        let stream = requests([1, 2, 3])
        for cut in 0...stream.count {
            var m = machine()
            var r = Responder()
            var out: [UInt8] = []
            feed(&m, Array(stream[..<cut]), &r, into: &out)
            feed(&m, Array(stream[cut...]), &r, into: &out)
            #expect(ids(out) == [1, 2, 3], "cut at \(cut)")
            #expect(m.decoder.bufferedByteCount == 0 && m.isReading && !m.isDone)
        }
    }

    @Test func answersLeaveInRequestOrderBehindAnAwaitedOne() {
        var m = machine()
        var r = Responder(awaited: [1, 4])
        var out: [UInt8] = []
        feed(&m, requests([1, 2, 3, 4, 5]), &r, into: &out)
        // 1 is at the commit queue: nothing may go before it.
        #expect(out.isEmpty)
        #expect(r.submitted.map(\.id) == [1, 4])
        #expect(m.held.count == 5)
        // Request 4's answer comes first: still nothing goes.
        m.answerArrived(slot: r.submitted[1].slot, frame: r.frame(4), &r)
        #expect(m.pendingOutputBytes == 0)
        // Then 1's: 1, then 2 and 3 answered in their turn, then 4, then 5.
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        #expect(ids(m.output.bytes) == [1, 2, 3, 4, 5])
        #expect(r.answeredLater == [2, 3, 5])
        #expect(m.held.isEmpty)
    }

    /// The loop's path: answers released into the loop's buffer when the
    /// connection owes nothing, and behind the owed bytes when it does, so
    /// the order on the socket is the order of the requests either way.
    @Test func arrivingAnswersGoToTheLoopsBufferOnlyWhenNothingIsOwed() {
        var m = machine()
        var r = Responder(awaited: [1, 3])
        var out: [UInt8] = []
        feed(&m, requests([1, 2, 3, 4]), &r, into: &out)
        #expect(out.isEmpty)
        // Nothing owed: 1 and 2 go to the loop's buffer, none to the machine's.
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), into: &out, &r)
        #expect(ids(out) == [1, 2])
        #expect(m.pendingOutputBytes == 0)
        // The socket takes only part of it: the rest is owed...
        m.keep(&out, written: 5, now: 1)
        #expect(m.pendingOutputBytes > 0)
        // ...and 3 and 4 then go behind it, not to the loop's buffer.
        var later: [UInt8] = []
        m.answerArrived(slot: r.submitted[1].slot, frame: r.frame(3), into: &later, &r)
        #expect(later.isEmpty)
        let owed = m.output.bytes
        let whole = r.frame(1) + r.frame(2) + r.frame(3) + r.frame(4)
        #expect(owed == Array(whole[5...]))
        #expect(m.held.isEmpty)
    }

    /// A worker's answers that follow each other in its array leave as one
    /// run, written from that array; an answer made on the loop in between
    /// (or one from elsewhere in the array) is copied after the run, so the
    /// socket still sees the requests' order.
    @Test func consecutiveAnswersOfOneBatchLeaveAsOneUncopiedRun() {
        var m = machine()
        var r = Responder(awaited: [1, 2, 3, 5])
        var out: [UInt8] = []
        feed(&m, requests([1, 2, 3, 4, 5]), &r, into: &out)
        #expect(out.isEmpty && r.submitted.map(\.id) == [1, 2, 3, 5])
        // One batch's array: 1, 2 and 5 back to back, 3 after a gap.
        let batch = r.frame(1) + r.frame(2) + [9, 9] + r.frame(3) + r.frame(5)
        var at = 0
        func run(_ id: UInt64, skip: Int = 0) -> FrameRun {
            at += skip
            let n = r.frame(id).count
            defer { at += n }
            return FrameRun(batch, at..<at + n)
        }
        let (one, two, three, five) = (run(1), run(2), run(3, skip: 2), run(5))
        var first: FrameRun?
        m.answerArrived(slot: r.submitted[0].slot, frame: one, into: &out, run: &first, &r)
        m.answerArrived(slot: r.submitted[1].slot, frame: two, into: &out, run: &first, &r)
        #expect(first?.range == 0..<(r.frame(1) + r.frame(2)).count, "1 and 2 joined, not copied")
        #expect(out.isEmpty)
        m.answerArrived(slot: r.submitted[2].slot, frame: three, into: &out, run: &first, &r)
        #expect(first?.range == 0..<(r.frame(1) + r.frame(2)).count, "3 is not next to 2 in the array")
        // 3 copied, then 4 answered on the loop, then 5 copied behind them.
        m.answerArrived(slot: r.submitted[3].slot, frame: five, into: &out, run: &first, &r)
        #expect(ids(first!.bytes) == [1, 2])
        #expect(ids(out) == [3, 4, 5])
        #expect(m.held.isEmpty && m.pendingOutputBytes == 0)
        // The socket takes 3 bytes of the run: the rest of it, then `out`, is owed.
        first!.withUnsafeBytes { m.keep($0, written: 3, now: 1) }
        m.keep(&out, written: 0, now: 1)
        #expect(m.output.bytes == Array((first!.bytes + out)[3...]))
    }

    @Test func answersBehindOwedOutputAreCopiedNotRun() {
        var m = machine()
        var r = Responder(awaited: [1, 2])
        var out: [UInt8] = []
        feed(&m, requests([1, 2]), &r, into: &out)
        var first: FrameRun?
        m.answerArrived(slot: r.submitted[0].slot, frame: FrameRun(r.frame(1)), into: &out, run: &first, &r)
        first!.withUnsafeBytes { m.keep($0, written: 2, now: 1) }
        // Owed bytes now: the next answer goes behind them.
        var next: FrameRun?
        var later: [UInt8] = []
        m.answerArrived(slot: r.submitted[1].slot, frame: FrameRun(r.frame(2)), into: &later, run: &next, &r)
        #expect(next == nil && later.isEmpty)
        #expect(m.output.bytes == Array((r.frame(1) + r.frame(2))[2...]))
    }

    @Test func owedOutputOverTheLimitPausesReadingUntilItDrainsToHalf() {
        var m = machine(maximumPendingOutputBytes: 300)
        var r = Responder(padding: 100)
        var out: [UInt8] = []
        feed(&m, requests(Array(1...8)), &r, into: &out)
        let first = ids(out)
        #expect(first.count < 8 && first == Array(1...UInt64(first.count)))
        #expect(!m.isReading)
        // The socket takes nothing: the answers are kept, the rest of the
        // requests stay unanswered in the decoder.
        m.keep(&out, written: 0, now: 2)
        #expect(m.wantsToWrite && m.decoder.bufferedByteCount > 0)
        let early = m.resume(now: 3)
        #expect(!early)
        // The client reads it all: reading resumes, more is answered, and
        // pauses again over the limit, until every request is answered.
        var all: [UInt64] = []
        var rounds = 0
        repeat {
            all += ids(m.output.bytes)
            m.wrote(m.pendingOutputBytes, now: 4)
            let resumed = m.resume(now: 4)
            #expect(resumed)
            var more: [UInt8] = []
            feed(&m, [], now: 5, &r, into: &more)
            m.keep(&more, written: 0, now: 5)
            rounds += 1
        } while m.decoder.bufferedByteCount > 0 && rounds < 10
        all += ids(m.output.bytes)
        #expect(all == Array(1...8) && rounds > 1)
        #expect(m.isReading)
    }

    @Test func tooManyAwaitedAnswersPauseReadingUntilHalfAreBack() {
        var m = machine(maximumAwaitedAnswers: 4)
        var r = Responder(awaited: Set(1...6))
        var out: [UInt8] = []
        feed(&m, requests(Array(1...6)), &r, into: &out)
        #expect(r.submitted.count == 4 && !m.isReading)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        m.answerArrived(slot: r.submitted[1].slot, frame: r.frame(2), &r)
        // Two still awaited: not under half of four yet.
        let early = m.resume(now: 2)
        #expect(!early && !m.isReading)
        m.answerArrived(slot: r.submitted[2].slot, frame: r.frame(3), &r)
        let resumed = m.resume(now: 3)
        #expect(resumed)
        feed(&m, [], &r, into: &out)
        #expect(r.submitted.map(\.id) == [1, 2, 3, 4, 5, 6])
    }

    @Test func anOversizeFrameIsAnsweredAfterWhatIsOwedThenTheConnectionCloses() {
        var m = machine(maximumFrameBytes: 64)
        var r = Responder(awaited: [1])
        var out: [UInt8] = []
        let error = feed(&m, requests([1]) + [0, 0, 3, 232] + [UInt8](repeating: 0, count: 10), &r, into: &out)
        #expect(error == .frameTooLarge(length: 1000, maximum: 64))
        #expect(!m.isReading && out.isEmpty && !m.isDone)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        let sent = answers(m.output.bytes)
        #expect(sent.map(\.0) == [1, 0] && sent.last?.1 == .resourceExhausted)
        m.wrote(m.pendingOutputBytes, now: 2)
        #expect(m.isDone)
    }

    @Test func thePeersEndClosesOnlyOnceEveryAnswerIsWritten() {
        var m = machine()
        var r = Responder(awaited: [7])
        var out: [UInt8] = []
        feed(&m, requests([7]), &r, into: &out)
        m.peerClosed()
        #expect(!m.isReading && !m.isDone)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(7), &r)
        #expect(!m.isDone && m.wantsToWrite)
        m.wrote(m.pendingOutputBytes - 1, now: 2)
        #expect(!m.isDone)
        m.wrote(1, now: 3)
        #expect(m.isDone)
    }

    @Test func aFailedReadDropsWhatWasOwed() {
        var m = machine()
        var r = Responder(padding: 10)
        var out: [UInt8] = []
        feed(&m, requests([1]), &r, into: &out)
        m.keep(&out, written: 3, now: 1)
        m.readFailed()
        #expect(m.isDone && !m.wantsToWrite)
    }

    @Test func pushedFramesWaitForOwedAnswersAndForBackedUpOutput() {
        var m = machine()
        var r = Responder(awaited: [1], padding: 70_000)
        var out: [UInt8] = []
        #expect(!m.mayPushWatchFrames)  // nothing waiting
        m.watchFrameWaiting()
        #expect(m.mayPushWatchFrames)
        feed(&m, requests([1]), &r, into: &out)
        // An answer is owed: the pushed frame must not overtake it.
        #expect(!m.mayPushWatchFrames)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        // Now over 64 KiB is owed: the frame waits (merged) until it drains.
        #expect(m.pendingOutputBytes > 64 * 1024 && !m.mayPushWatchFrames)
        m.wrote(m.pendingOutputBytes, now: 2)
        #expect(m.mayPushWatchFrames)
        m.pushWatchFrames { $0 += r.frame(99) }
        #expect(ids(m.output.bytes) == [99] && !m.mayPushWatchFrames)
        m.watchFrameWaiting()
        m.watchFrameDropped()
        #expect(!m.mayPushWatchFrames)
    }

    /// The fan-out's path: with nothing owed, pushed frames go into the
    /// loop's buffer for a direct write; what the socket does not take is
    /// kept, and holds back the next frames like any owed output.
    @Test func pushedFramesIntoTheLoopsBufferKeepWhatTheSocketDidNotTake() {
        var m = machine()
        let r = Responder(padding: 10)
        m.watchFrameWaiting()
        #expect(m.mayWriteDirectly && m.mayPushWatchFrames)
        var out: [UInt8] = []
        m.pushWatchFrames(into: &out) { $0 += r.frame(7) }
        #expect(ids(out) == [7] && m.output.isEmpty && !m.mayPushWatchFrames)
        // The socket took 5 bytes: the rest is owed, in order.
        m.keep(&out, written: 5, now: 1)
        #expect(m.pendingOutputBytes == r.frame(7).count - 5 && !m.mayWriteDirectly)
        m.watchFrameWaiting()
        m.pushWatchFrames { $0 += r.frame(8) }
        m.wrote(m.pendingOutputBytes, now: 2)
        #expect(m.output.isEmpty && m.mayWriteDirectly)
    }

    @Test func theClockCutsOffSlowReadersAndFramesThatDoNotFinish() {
        var m = machine()
        var r = Responder(padding: 10)
        var out: [UInt8] = []
        // Half a frame at second 1.
        let frame = requests([1])
        feed(&m, Array(frame.prefix(6)), now: Self.second, &r, into: &out)
        #expect(m.timeout(now: 5 * Self.second) == nil)
        #expect(m.timeout(now: 6 * Self.second + 1) == .frameNotFinished(buffered: 6, announced: frame.count - 4))
        // The rest comes: answered; the socket takes none of it at second 7.
        feed(&m, Array(frame.dropFirst(6)), now: 7 * Self.second, &r, into: &out)
        m.keep(&out, written: 0, now: 7 * Self.second)
        #expect(m.timeout(now: 16 * Self.second) == nil)
        #expect(m.timeout(now: 17 * Self.second + 1) == .notReading(pendingBytes: m.pendingOutputBytes))
        // Progress resets the stall.
        m.wrote(1, now: 17 * Self.second)
        #expect(m.timeout(now: 18 * Self.second) == nil)
    }

    @Test func idleConnectionsCloseOnlyWhenConfiguredAndOwingNothing() {
        let none = machine()
        #expect(none.timeout(now: 1000 * Self.second) == nil)
        var m = machine(idleTimeout: 30 * Self.second)
        var r = Responder(awaited: [1])
        var out: [UInt8] = []
        feed(&m, requests([1]), now: Self.second, &r, into: &out)
        // An answer is owed: not idle, however long it takes.
        #expect(m.timeout(now: 100 * Self.second) == nil)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        m.wrote(m.pendingOutputBytes, now: 100 * Self.second)
        #expect(m.timeout(now: 129 * Self.second) == nil)
        #expect(m.timeout(now: 131 * Self.second) == .idle)
    }

    /// A watching connection waits for changes, which may not come for
    /// hours: it is not idle, however long it does nothing.
    @Test func aWatchingConnectionIsNeverIdle() {
        var m = machine(idleTimeout: 30 * Self.second)
        var r = Responder()
        var out: [UInt8] = []
        feed(&m, requests([1]), now: Self.second, &r, into: &out)
        m.keep(&out, written: out.count, now: Self.second)
        #expect(m.timeout(now: 1000 * Self.second, watching: true) == nil)
        #expect(m.timeout(now: 1000 * Self.second, watching: false) == .idle)
    }

    /// The loop's path for a shard's answer (into its buffer, then offered
    /// to the socket): an answer that took long restarts the idle clock
    /// when it goes out, as one written from the connection's buffer does.
    @Test func anAnswerDeliveredThroughTheLoopsBufferRestartsTheIdleClock() {
        var m = machine(idleTimeout: 30 * Self.second)
        var r = Responder(awaited: [1])
        var out: [UInt8] = []
        feed(&m, requests([1]), now: Self.second, &r, into: &out)
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), into: &out, &r)
        // The socket takes it all at 100 s.
        m.keep(&out, written: out.count, now: 100 * Self.second)
        #expect(m.pendingOutputBytes == 0)
        #expect(m.timeout(now: 129 * Self.second) == nil, "closed as idle right after its answer")
        #expect(m.timeout(now: 131 * Self.second) == .idle)
    }

    @Test func aCutOffDropsTheUnfinishedFrameAndSaysWhyOnce() {
        var m = machine()
        var r = Responder(awaited: [1])
        var out: [UInt8] = []
        feed(&m, requests([1]) + Array(requests([2]).prefix(5)), &r, into: &out)
        #expect(m.decoder.bufferedByteCount == 5)
        m.cutOff(Status(.resourceExhausted, "too slow"))
        m.cutOff(Status(.resourceExhausted, "again"))
        #expect(m.decoder.bufferedByteCount == 0 && m.decoder.storageByteCount == 0 && !m.isReading)
        // The status goes after the answer owed before it, once.
        m.answerArrived(slot: r.submitted[0].slot, frame: r.frame(1), &r)
        let sent = answers(m.output.bytes)
        #expect(sent.map(\.0) == [1, 0] && sent.last?.1 == .resourceExhausted)
    }
}
