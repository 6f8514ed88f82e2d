import GroserClient
import GroserSystem
import GroserWire
import Synchronization

/// Why a run could not start.
public struct BenchError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One connection of the load generator. Its P request frames are encoded
/// once into `batch`; each refill rewrites their ids and sends the whole
/// batch with one write. Answers are parsed in place in `input`. In a mix,
/// each refill copies the read's or the write's frame into each place of the
/// batch instead, and remembers which it sent.
final class BenchConnection {
    let socket: Socket
    /// P copies of the request frame, back to back (a mix: P frames of either kind).
    private let batch: UnsafeMutableRawBufferPointer
    private let frameSize: Int
    private let pipeline: Int
    /// A mix's frames, the read's then the write's; nil for a single method.
    private let kindFrames: UnsafeMutableRawBufferPointer?
    private let readFrameSize: Int
    /// A search's query frames, one after another, sent in turn; nil otherwise.
    private let cycleFrames: UnsafeMutableRawBufferPointer?
    private let cycleRanges: [Range<Int>]
    private let writePercent: Int
    /// Where this connection starts in the mix's cycle of 100 requests.
    private let phase: Int
    /// The kind (0 read, 1 write) of each request of the current batch.
    private let batchKinds: UnsafeMutableBufferPointer<UInt8>
    /// Requests in the current batch.
    private var batchCount = 0
    /// Bytes of the current batch: [sendOffset, sendEnd) not yet written.
    var sendOffset = 0
    var sendEnd = 0
    /// Requests this connection may still send (Int.max in a timed run).
    var remaining: Int
    var nextSequence: UInt64 = 0
    var expectedSequence: UInt64 = 0
    var inFlight = 0
    /// When the current batch was sent.
    var sentAt: UInt64 = 0
    var waitingToWrite = false
    var isOpen = true
    /// The connection's epoll token: its index in the worker's list.
    var token: UInt64 = 0

    /// Received bytes: [readStart, readEnd) not yet parsed.
    private(set) var input: UnsafeMutableRawBufferPointer
    var readStart = 0
    var readEnd = 0
    /// The whole length of a frame whose start has arrived and whose rest has not.
    var pendingFrameBytes = 0
    private static let minimumReadSpace = 16 * 1024

    /// `frames` is one frame, or a mix's read and write frames with the
    /// share of writes and the connection's `phase` in the cycle.
    /// With `cycle`, `frames` are a search's queries, sent in turn from `phase` on.
    init(socket: Socket, frames: [RequestFrame], writePercent: Int = 0, phase: Int = 0, pipeline: Int, requests: Int,
         cycle: Bool = false) {
        precondition(cycle ? !frames.isEmpty : frames.count == 1 || frames.count == 2)
        self.socket = socket
        self.pipeline = pipeline
        self.remaining = requests
        self.writePercent = writePercent
        self.phase = phase
        batchKinds = .allocate(capacity: pipeline)
        batchKinds.initialize(repeating: 0)
        if cycle {
            let all = frames.flatMap(\.bytes)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: all.count, alignment: 8)
            buffer.copyBytes(from: all)
            var ranges: [Range<Int>] = []
            var at = 0
            for f in frames { ranges.append(at..<(at + f.bytes.count)); at += f.bytes.count }
            cycleFrames = buffer
            cycleRanges = ranges
            frameSize = frames.map(\.bytes.count).max()!
            batch = .allocate(byteCount: frameSize * pipeline, alignment: 8)
            kindFrames = nil
            readFrameSize = frameSize
        } else if frames.count == 1 {
            cycleFrames = nil
            cycleRanges = []
            let size = frames[0].bytes.count
            let batch = UnsafeMutableRawBufferPointer.allocate(byteCount: size * pipeline, alignment: 8)
            frames[0].bytes.withUnsafeBytes { one in
                for i in 0..<pipeline { (batch.baseAddress! + i * size).copyMemory(from: one.baseAddress!, byteCount: size) }
            }
            frameSize = size
            self.batch = batch
            kindFrames = nil
            readFrameSize = size
        } else {
            cycleFrames = nil
            cycleRanges = []
            let read = frames[0].bytes, write = frames[1].bytes
            let both = UnsafeMutableRawBufferPointer.allocate(byteCount: read.count + write.count, alignment: 8)
            both.copyBytes(from: read + write)
            kindFrames = both
            readFrameSize = read.count
            frameSize = max(read.count, write.count)
            batch = .allocate(byteCount: frameSize * pipeline, alignment: 8)
        }
        input = .allocate(byteCount: 64 * 1024, alignment: 8)
    }

    deinit {
        batch.deallocate()
        kindFrames?.deallocate()
        cycleFrames?.deallocate()
        batchKinds.deallocate()
        input.deallocate()
        if socket.isOpen { socket.close() }
    }

    /// Rewrites the ids of the next `min(P, remaining)` requests (a mix:
    /// writes each one's frame first); returns how many.
    func prepareBatch() -> Int {
        let count = min(pipeline, remaining)
        let base = batch.baseAddress!
        if let cycleFrames {
            var offset = 0
            for _ in 0..<count {
                let r = cycleRanges[Int((nextSequence + UInt64(phase)) % UInt64(cycleRanges.count))]
                (base + offset).copyMemory(from: cycleFrames.baseAddress! + r.lowerBound, byteCount: r.count)
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + offset + RequestFrame.idOffset)
                offset += r.count
                nextSequence += 1
            }
            sendEnd = offset
        } else if let kindFrames {
            var offset = 0
            for i in 0..<count {
                let write = BenchMethod.mixSendsWrite(sequence: nextSequence, phase: phase, percent: writePercent)
                let size = write ? kindFrames.count - readFrameSize : readFrameSize
                (base + offset).copyMemory(from: kindFrames.baseAddress! + (write ? readFrameSize : 0), byteCount: size)
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + offset + RequestFrame.idOffset)
                batchKinds[i] = write ? 1 : 0
                offset += size
                nextSequence += 1
            }
            sendEnd = offset
        } else {
            for i in 0..<count {
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + i * frameSize + RequestFrame.idOffset)
                nextSequence += 1
            }
            sendEnd = count * frameSize
        }
        remaining -= count
        inFlight = count
        batchCount = count
        sendOffset = 0
        return count
    }

    /// The kind (0 read, 1 write; 0 for a single method) of the answer
    /// expected next.
    @inline(__always)
    var kindOfNextAnswer: Int { Int(batchKinds[batchCount - inFlight]) }

    /// The kinds of the requests in flight, in order.
    var kindsInFlight: [Int] { (batchCount - inFlight..<batchCount).map { Int(batchKinds[$0]) } }

    var unsent: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(batch)[sendOffset..<sendEnd])
    }

    /// Free space after `readEnd`, made large enough for the frame in
    /// progress by moving unread bytes to the front and growing.
    func readSpace() -> UnsafeMutableRawBufferPointer {
        if readStart == readEnd { readStart = 0; readEnd = 0 }
        if input.count - readEnd < Self.minimumReadSpace || input.count - readStart < pendingFrameBytes {
            let unread = readEnd - readStart
            if readStart > 0 {
                input.baseAddress!.copyMemory(from: input.baseAddress! + readStart, byteCount: unread)
                readStart = 0
                readEnd = unread
            }
            let wanted = max(unread + Self.minimumReadSpace, pendingFrameBytes)
            if input.count < wanted {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(input.count * 2, wanted), alignment: 8)
                grown.baseAddress!.copyMemory(from: input.baseAddress!, byteCount: unread)
                input.deallocate()
                input = grown
            }
        }
        return UnsafeMutableRawBufferPointer(rebasing: input[readEnd...])
    }
}

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

/// One kind of request of a mix ("reads", "writes"), counted apart.
public struct BenchPart: Sendable {
    public var name: String
    public var method: BenchMethod
    public var tally: BenchTally

    public init(name: String, method: BenchMethod, tally: BenchTally) {
        self.name = name
        self.method = method
        self.tally = tally
    }
}

/// The outcome of one run.
public struct BenchResult: Sendable {
    public var options: BenchOptions
    public var seconds: Double
    /// Every request, whatever its kind.
    public var tally: BenchTally
    /// A mix's kinds, each counted apart; empty for a single method.
    public var parts: [BenchPart]

    public init(options: BenchOptions, seconds: Double, tally: BenchTally, parts: [BenchPart] = []) {
        self.options = options
        self.seconds = seconds
        self.tally = tally
        self.parts = parts
    }

    /// Successful requests per second; failed requests are not counted.
    public var requestsPerSecond: Double { rate(of: tally) }

    /// `tally`'s successful requests per second of the whole run.
    public func rate(of tally: BenchTally) -> Double { seconds > 0 ? Double(tally.succeeded) / seconds : 0 }
}

/// Runs the load: connects every connection, starts the threads, and waits.
public enum LoadGenerator {
    /// Each connection's request frames, one per kind of `options.method`:
    /// the same for every connection, except cart-add's (a mix's write),
    /// where every connection gets a session of its own (opened here).
    static func requestFrames(_ options: BenchOptions) throws(BenchError) -> [[RequestFrame]] {
        var perKind: [[RequestFrame]] = []
        for kind in options.method.kinds {
            if case .search(let selector, let queries) = kind {
                let all = queries.map { RequestFrame(requestMethod: .searchProducts(SearchRequest(selector: selector, query: $0, pageSize: 10))) }
                return Array(repeating: all, count: options.connections)
            }
            if case .cartAdd(let selector, let named) = kind {
                perKind.append(try cartAddFrames(selector, product: named, options))
            } else {
                perKind.append(Array(repeating: RequestFrame(method: kind), count: options.connections))
            }
        }
        return (0..<options.connections).map { i in perKind.map { $0[i] } }
    }

    /// A cart-add frame per connection, each in a session of its own.
    private static func cartAddFrames(_ selector: StoreSelector, product named: String?,
                                      _ options: BenchOptions) throws(BenchError) -> [RequestFrame] {
        let client = GroserClient(location: benchLocation(options), timeout: 10)
        defer { client.close() }
        do {
            let catalog = try client.store(selector, includeProducts: named == nil || options.cartLines > 1)
            let inStock = catalog.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }.map(\.uid)
            guard let product = named ?? inStock.first else {
                throw BenchError("the store \(catalog.store.uid) has no product in stock to add")
            }
            // The cart's other lines, added before the run.
            let others = inStock.filter { $0 != product }.prefix(options.cartLines - 1)
            guard others.count == options.cartLines - 1 else {
                throw BenchError("--cart-lines \(options.cartLines): the store \(catalog.store.uid) has only \(others.count + 1) products in stock")
            }
            var frames: [RequestFrame] = []
            for _ in 0..<options.connections {
                let session = try client.openSession()
                let cart = CartMutation(session: session, storeUID: catalog.store.uid)
                for uid in others { _ = try client.addItem(cart, productUID: uid, quantity: 1) }
                frames.append(RequestFrame(requestMethod: .addItem(cart, productUID: product, quantity: 1)))
            }
            return frames
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("cannot prepare cart-add: \(error)")
        }
    }

    /// `progress` is called on the calling thread about every 250 ms with
    /// the requests answered so far and the seconds since the start.
    public static func run(_ options: BenchOptions, progress: ((UInt64, Double) -> Void)? = nil) throws(BenchError) -> BenchResult {
        let frames = try requestFrames(options)
        let threadCount = max(1, min(options.threads, options.connections))
        var perConnection: [Int] = []
        switch options.length {
        case .requests(let n):
            for i in 0..<options.connections {
                perConnection.append(n / options.connections + (i < n % options.connections ? 1 : 0))
            }
        case .seconds:
            perConnection = Array(repeating: Int.max, count: options.connections)
        }

        var sockets: [Socket] = []
        for _ in 0..<options.connections {
            do {
                // Checked as groser-client checks: the directory and who answers.
                let socket = try GroserClient.connect(to: benchLocation(options))
                do { try socket.setNonBlocking(true) } catch {
                    socket.close()
                    throw GroserError.cannotConnect(path: options.socketPath, errno: error)
                }
                sockets.append(socket)
            } catch {
                for s in sockets { s.close() }
                throw BenchError("\(error)")
            }
        }

        let start = monotonicNanoseconds()
        let stopSendingAt: UInt64
        if case .seconds(let s) = options.length { stopSendingAt = start + UInt64(s * 1e9) } else { stopSendingAt = .max }
        var workers: [BenchWorker] = []
        do {
            for _ in 0..<threadCount { workers.append(try BenchWorker(options: options, stopSendingAt: stopSendingAt)) }
            for (i, socket) in sockets.enumerated() {
                var writePercent = 0
                if case .mix(_, let percent, _) = options.method { writePercent = percent }
                var cycle = false
                if case .search = options.method { cycle = true }
                try workers[i % threadCount].add(BenchConnection(socket: socket, frames: frames[i], writePercent: writePercent,
                                                                 phase: i, pipeline: options.pipeline,
                                                                 requests: perConnection[i], cycle: cycle))
            }
        } catch {
            throw BenchError("cannot set up epoll: \(error)")
        }
        var threads: [OSThread] = []
        for (i, worker) in workers.enumerated() {
            do {
                threads.append(try OSThread(name: "bench\(i)") { worker.run() })
            } catch {
                // The workers that started still finish their share.
                for t in threads { t.join() }
                throw BenchError("cannot start a thread: \(error)")
            }
        }
        if let progress {
            while !workers.allSatisfy({ $0.done.load(ordering: .acquiring) }) {
                OSThread.sleep(milliseconds: 250)
                let answered = workers.reduce(0) { $0 + UInt64($1.answered.load(ordering: .relaxed)) }
                progress(answered, Double(monotonicNanoseconds() - start) / 1e9)
            }
        }
        for t in threads { t.join() }

        var tally = BenchTally()
        var kindTallies = options.method.kindNames.map { _ in BenchTally() }
        var end = start
        for w in workers {
            tally.merge(w.tally)
            for k in kindTallies.indices { kindTallies[k].merge(w.kindTallies[k]) }
            end = max(end, w.finishedAt)
        }
        let kinds = options.method.kinds
        let parts = zip(options.method.kindNames, kindTallies).enumerated().map { k, named in
            BenchPart(name: named.0, method: kinds[k], tally: named.1)
        }
        return BenchResult(options: options, seconds: Double(end - start) / 1e9, tally: tally, parts: parts)
    }
}

/// The socket as groser-client would see it: the per-user default (its
/// directory checked) when --socket names that path, else the named path;
/// with $GROSER_SERVER_UID as the expected server uid either way.
func benchLocation(_ options: BenchOptions) -> SocketLocation {
    let environment = SocketLocation.fromEnvironment()
    if options.socketPath == environment.path { return environment }
    return SocketLocation(path: options.socketPath, isExplicit: true, expectedServerUID: environment.expectedServerUID)
}
