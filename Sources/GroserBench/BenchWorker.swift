import GroserSystem
import GroserWire
import Synchronization

/// One load generator thread: an epoll loop over its share of the connections.
final class BenchWorker: @unchecked Sendable {
    // @unchecked: everything but the atomics is touched only by the worker's
    // thread while it runs, and by the main thread after it is joined.
    private let epoll: Epoll
    private var connections: [BenchConnection] = []
    private var open = 0
    /// The body field of each kind's OK answer.
    private let expectedFields: [UInt32]
    /// A mix's answers counted by kind as well (empty for a single method).
    private(set) var kindTallies: [BenchTally]
    private let maximumFrameBytes: Int
    private let stopSendingAt: UInt64
    private let timed: Bool
    private(set) var tally = BenchTally()
    private(set) var finishedAt: UInt64 = 0
    /// Requests answered so far, for the progress line.
    let answered = Atomic<Int>(0)
    let done = Atomic<Bool>(false)
    /// A connection with requests outstanding and nothing received for this long has stalled.
    private static let stallNanoseconds: UInt64 = 30_000_000_000

    init(options: BenchOptions, stopSendingAt: UInt64) throws(Errno) {
        epoll = try Epoll(maxEvents: 256)
        expectedFields = options.method.kinds.map(\.responseField.rawValue)
        kindTallies = options.method.kindNames.map { _ in BenchTally() }
        maximumFrameBytes = options.maximumFrameBytes
        self.stopSendingAt = stopSendingAt
        if case .seconds = options.length { timed = true } else { timed = false }
    }

    func add(_ connection: BenchConnection) throws(Errno) {
        connection.token = UInt64(connections.count)
        try epoll.add(connection.socket.descriptor, events: [.readable, .readHangup], token: connection.token)
        connections.append(connection)
        open += 1
    }

    func run() {
        for c in connections { refill(c) }
        var lastProgress = monotonicNanoseconds()
        var lastAnswered: UInt64 = 0
        while open > 0 {
            do {
                try epoll.wait(timeoutMilliseconds: 200) { token, events in
                    let c = connections[Int(token)]
                    guard c.isOpen else { return }
                    if events.contains(.writable) { send(c) }
                    if c.isOpen && !events.isDisjoint(with: [.readable, .readHangup, .hangup, .error]) { receive(c) }
                }
            } catch {
                for c in connections where c.isOpen { fail(c) }
                break
            }
            let now = monotonicNanoseconds()
            let answeredNow = tally.answered
            answered.store(Int(answeredNow), ordering: .relaxed)
            if answeredNow != lastAnswered {
                lastAnswered = answeredNow
                lastProgress = now
            } else if now - lastProgress > Self.stallNanoseconds {
                for c in connections where c.isOpen { fail(c) }
            }
        }
        finishedAt = monotonicNanoseconds()
        answered.store(Int(tally.answered), ordering: .relaxed)
        done.store(true, ordering: .releasing)
    }

    /// Sends the next batch, or closes the connection when it has sent its share.
    private func refill(_ c: BenchConnection) {
        let now = monotonicNanoseconds()
        guard c.remaining > 0, !timed || now < stopSendingAt else { return close(c) }
        _ = c.prepareBatch()
        c.sentAt = now
        send(c)
    }

    private func send(_ c: BenchConnection) {
        while c.sendOffset < c.sendEnd {
            switch Result(catching: { () throws(Errno) -> IOResult in try c.socket.write(c.unsent) }) {
            case .success(.processed(let n)):
                c.sendOffset += n
            case .success(.wouldBlock):
                if !c.waitingToWrite { watch(c, writable: true) }
                return
            case .failure:
                return fail(c)
            }
        }
        if c.waitingToWrite { watch(c, writable: false) }
    }

    private func watch(_ c: BenchConnection, writable: Bool) {
        let events: EpollEvents = writable ? [.readable, .readHangup, .writable] : [.readable, .readHangup]
        do {
            try epoll.modify(c.socket.descriptor, events: events, token: c.token)
            c.waitingToWrite = writable
        } catch {
            fail(c)
        }
    }

    /// Reads what the socket has and counts every whole answer.
    private func receive(_ c: BenchConnection) {
        while c.isOpen {
            let space = c.readSpace()
            let result = Result(catching: { () throws(Errno) -> IOResult in try c.socket.read(into: space) })
            switch result {
            case .success(.processed(let n)) where n > 0:
                c.readEnd += n
                consumeFrames(c, receivedAt: monotonicNanoseconds())
                // A short read drained the socket; level-triggered epoll
                // reports more, so skip the read that would say EAGAIN.
                if n < space.count { return }
            case .success(.wouldBlock):
                return
            case .success:
                return fail(c)  // the server closed the connection
            case .failure:
                return fail(c)
            }
        }
    }

    private func consumeFrames(_ c: BenchConnection, receivedAt: UInt64) {
        let base = UnsafeRawPointer(c.input.baseAddress!)
        while c.isOpen && c.readEnd - c.readStart >= Framing.headerSize {
            let header = base + c.readStart
            let length = Int(header.load(as: UInt8.self)) << 24 | Int(header.load(fromByteOffset: 1, as: UInt8.self)) << 16
                | Int(header.load(fromByteOffset: 2, as: UInt8.self)) << 8 | Int(header.load(fromByteOffset: 3, as: UInt8.self))
            guard length <= maximumFrameBytes else {
                tally.malformed += 1
                return fail(c)
            }
            let total = Framing.headerSize + length
            guard c.readEnd - c.readStart >= total else {
                c.pendingFrameBytes = total
                return
            }
            c.pendingFrameBytes = 0
            let envelope = ResponseEnvelope.parse(UnsafeRawBufferPointer(start: header + Framing.headerSize, count: length))
            c.readStart += total
            guard c.inFlight > 0 else {
                // An answer to nothing asked: the stream cannot be trusted.
                tally.malformed += 1
                return fail(c)
            }
            let kind = c.kindOfNextAnswer
            let expectedID = RequestFrame.id(sequence: c.expectedSequence)
            tally.count(envelope, expectedID: expectedID, expectedField: expectedFields[kind],
                        frameBytes: total, latency: receivedAt &- c.sentAt)
            if !kindTallies.isEmpty {
                kindTallies[kind].count(envelope, expectedID: expectedID, expectedField: expectedFields[kind],
                                        frameBytes: total, latency: receivedAt &- c.sentAt)
            }
            c.expectedSequence += 1
            c.inFlight -= 1
            if c.inFlight == 0 { refill(c) }
        }
    }

    private func fail(_ c: BenchConnection) {
        tally.connectionFailures += 1
        tally.unanswered += UInt64(c.inFlight)
        if !kindTallies.isEmpty {
            for kind in c.kindsInFlight { kindTallies[kind].unanswered += 1 }
        }
        c.inFlight = 0
        close(c)
    }

    private func close(_ c: BenchConnection) {
        guard c.isOpen else { return }
        c.isOpen = false
        epoll.remove(c.socket.descriptor)
        c.socket.close()
        open -= 1
    }
}
