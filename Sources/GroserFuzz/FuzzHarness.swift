import GroserServer
import GroserStorage
import GroserSystem
import GroserWire

/// Everything between the bytes a client sends and the frames groserd
/// answers, run in one process with no socket: the fuzz target
/// (`groser-fuzz`, built by `tools/fuzz`) and the regression tests call the
/// same `run`.
///
/// One input is a raw byte stream as one connection would send it. It is
/// split into frames three ways, which must agree: by `FrameDecoder` whole,
/// by `FrameDecoder` in input-derived chunks, and by the event loop's own
/// `ConnectionStateMachine` (its answers awaited, delivered out of order,
/// and written a few bytes at a time, which must leave in request order). Each
/// frame is read by the allocation-free reader or protobuf-c (which must
/// agree) and goes through the daemon's `Dispatcher` over the sample
/// catalog's `EncodedCatalog`, with the workers run inline
/// (`FuzzExecutors`): a real customer shard whose state lives in memory and
/// is rebuilt before each input, and SetProduct through `CommerceService`,
/// both writing to the real SQLite store through transactions that are
/// rolled back, so one input cannot change what the next one finds.
///
/// A crash (a trap, an ASan report) is a finding; so is every broken
/// invariant `run` returns.
public final class FuzzHarness {
    /// The largest frame body the harness accepts; small, so the over-size
    /// path is reachable from short inputs.
    public static let maximumFrameBytes = 64 * 1024
    /// A session the store knows, so inputs reach the cart rules (a real
    /// session token is random and cannot be guessed by a fuzzer).
    public static let session = "5e55105e55105e55105e55105e55105e"
    /// Users by request id: id % 3 == 0 is root, 1 has no credentials, 2 is
    /// an ordinary user; `adminUID` is in the admin list.
    public static let ordinaryUID: UInt32 = 4242
    public static let adminUID: UInt32 = 1000

    /// The directory holding the temporary database.
    public let directory: String
    let store: SQLiteCatalogStore
    private let dispatcher: Dispatcher
    let commerce: CommerceService
    let customers: CustomerService
    let catalog: EncodedCatalog
    let watches: WatchHub
    /// The input's connection's watches (an input is one connection).
    var watchers: [Watcher] = []
    /// The store failed outside any request's savepoint (the commit queue's executor).
    var storeFailure: StorageError?
    /// Called with one line per answered frame (request → response), when set.
    public var trace: ((String) -> Void)?

    /// Creates the store in a fresh temporary directory and loads the sample catalog.
    public init() throws {
        directory = try Files.makeTemporaryDirectory(prefix: "groser-fuzz-")
        store = try SQLiteCatalogStore(directory: directory)
        let (catalog, version) = try store.loadCatalog()
        let encoded = EncodedCatalog(catalog: catalog, version: version, imageBaseURL: "http://img.test",
                                     serverVersion: ProtocolInfo.serverVersion)
        dispatcher = Dispatcher(handler: RequestHandler(catalog: encoded, startedAtNanoseconds: monotonicNanoseconds()))
        self.catalog = encoded
        watches = WatchHub(catalog: encoded, loops: 1)
        // A fixed clock keeps card expiry and order times the same on every run.
        // The largest line groserd allows (--max-quantity), so counts and
        // totals can reach their arithmetic limits.
        commerce = CommerceService(adminUIDs: [Self.adminUID], imageBaseURL: "http://img.test")
        let catalogService = try CatalogService(store: store, imageBaseURL: "http://img.test")
        let source = store
        customers = try CustomerService(
            stores: [SeededCustomerStore(session: SessionKey(token: Self.session), createdAtUnix: 1_780_000_000)],
            rules: CartRules(limits: CartLimits(maximumQuantity: Self.maximumQuantity)), lifetimes: CustomerLifetimes(),
            catalog: catalogService, orders: store.rollingBack,
            products: { (uid) throws(StorageError) in try source.productFacts(uid) },
            logger: Logger(level: .error, sink: { _ in }), yearMonth: { (2026, 6) }, unixTime: { 1_780_000_000 })
    }

    /// The harness's --max-quantity: groserd's largest.
    public static let maximumQuantity: UInt32 = 2_000_000_000

    /// Removes the temporary database. The harness must not be used after.
    public func removeFiles() {
        for name in [SQLiteCatalogStore.fileName, SQLiteCatalogStore.fileName + "-wal",
                     SQLiteCatalogStore.fileName + "-shm"] {
            try? Files.remove(directory + "/" + name)
        }
        try? Files.removeDirectory(directory)
    }

    /// Runs one input; returns the invariants it broke (empty when none).
    public func run(_ input: UnsafeRawBufferPointer) -> [String] {
        var problems: [String] = []
        let frames = Self.split(input, problems: &problems)

        // Client-side decoding of the same bytes must not crash either.
        for frame in frames { _ = try? Response.decode(frame) }

        do {
            try customers.reload()
            watchers = []
            for (index, frame) in frames.enumerated() {
                let out = try answer(frame)
                check(response: out, toFrame: frame, index: index, problems: &problems)
            }
        } catch {
            problems.append("the store failed outside any request: \(error)")
        }
        return problems
    }

    /// Runs one input given as an array.
    public func run(_ input: [UInt8]) -> [String] {
        input.withUnsafeBytes { run($0) }
    }

    // MARK: - Framing

    /// The input's frames, read whole and again in chunks; both must agree.
    private static func split(_ input: UnsafeRawBufferPointer, problems: inout [String]) -> [[UInt8]] {
        var whole = FrameDecoder(maximumFrameBytes: maximumFrameBytes, initialCapacity: 16)
        whole.append(input)
        var frames: [[UInt8]] = []
        var wholeError: FrameError?
        do {
            while let f = try whole.next() { frames.append(Array(f)) }
        } catch {
            wholeError = error
        }

        // The same bytes in chunks of 1 to 37 bytes, sizes drawn from a
        // generator seeded by the input, alternating both ways of filling
        // the decoder, as reads split frames anywhere.
        var chunked = FrameDecoder(maximumFrameBytes: maximumFrameBytes, initialCapacity: 1)
        var chunkedFrames: [[UInt8]] = []
        var chunkedError: FrameError?
        var rng = SplitMix64(seed: fnv1a(input))
        var offset = 0
        var viaTail = false
        feeding: while offset < input.count {
            let n = min(Int(rng.next() % 37) + 1, input.count - offset)
            let chunk = UnsafeRawBufferPointer(rebasing: input[offset..<(offset + n)])
            if viaTail {
                let written = chunked.writeTail(capacity: n) { (raw: UnsafeMutableRawBufferPointer) -> Int in
                    raw.copyMemory(from: chunk)
                    return n
                }
                if written != n { problems.append("writeTail wrote \(written) of \(n) bytes") }
            } else {
                chunked.append(chunk)
            }
            viaTail.toggle()
            offset += n
            do {
                while let f = try chunked.next() { chunkedFrames.append(Array(f)) }
            } catch {
                chunkedError = error
                break feeding
            }
        }
        if chunkedFrames != frames {
            problems.append("chunked reading gave \(chunkedFrames.count) frame(s), whole reading \(frames.count)")
        }

        // As the event loop reads: through the connection state machine the
        // loop runs, in chunks, with some answers awaited (as cart requests
        // wait for the commit queue) and delivered out of order, and a
        // socket that takes a few bytes at a time; every frame must reach
        // the responder once, in order, and the answers leave in that order.
        let (machineFrames, machineError, machineProblems) = Self.throughTheStateMachine(input, wholeError: wholeError)
        problems += machineProblems
        if machineFrames != frames || machineError != wholeError {
            problems.append("the connection state machine gave \(machineFrames.count) frame(s) and \(String(describing: machineError)), whole reading \(frames.count) and \(String(describing: wholeError))")
        }
        if chunkedError != wholeError {
            problems.append("chunked reading ended with \(String(describing: chunkedError)), whole reading with \(String(describing: wholeError))")
        }
        if wholeError == nil && chunkedError == nil && whole.bufferedByteCount != chunked.bufferedByteCount {
            problems.append("left over: \(whole.bufferedByteCount) byte(s) whole, \(chunked.bufferedByteCount) chunked")
        }
        return frames
    }

    /// Records each frame the machine hands it and answers it with a frame
    /// whose id is the frame's place (from 1); about one in three is
    /// "awaited" and answered later, out of order.
    private struct RecordingResponder: FrameResponder {
        var frames: [[UInt8]] = []
        var awaited: [(slot: UInt64, id: UInt64)] = []
        var rng: SplitMix64

        mutating func answer(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            frames.append(Array(body))
            if rng.next() % 3 == 0 {
                awaited.append((slot, UInt64(frames.count)))
                return .awaiting
            }
            ResponseFrameWriter.appendOK(id: UInt64(frames.count), field: .logout, body: [], to: &out)
            return .answered
        }

        mutating func hold(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64) -> ConnectionStateMachine.HeldAnswer {
            var out: [UInt8] = []
            return answer(body, receivedAt: receivedAt, slot: slot, into: &out) == .awaiting ? .awaiting : .ready(FrameRun(out))
        }

        mutating func answer(held request: Request, receivedAt: UInt64, into out: inout [UInt8]) {}
    }

    private static func throughTheStateMachine(_ input: UnsafeRawBufferPointer, wholeError: FrameError?)
        -> (frames: [[UInt8]], error: FrameError?, problems: [String]) {
        var rng = SplitMix64(seed: fnv1a(input) ^ 0x5bd1_e995)
        var machine = ConnectionStateMachine(
            limits: .init(maximumFrameBytes: maximumFrameBytes, maximumPendingOutputBytes: 64, maximumAwaitedAnswers: 4,
                          slowReaderTimeout: 10_000_000_000, frameReadTimeout: 5_000_000_000),
            now: 1)
        var responder = RecordingResponder(rng: SplitMix64(seed: fnv1a(input)))
        var written: [UInt8] = []
        var error: FrameError?
        var problems: [String] = []
        var now: UInt64 = 1

        /// The commit queue answers, newest first, each delivered either into
        /// the machine's own buffer or (as the event loop does) into the
        /// loop's, offered to the socket, the rest kept; the socket takes up
        /// to 61 bytes. Or, as the loop does with a shard's batch, all of
        /// them as runs of one array (in request order, a few bytes of
        /// another answer now and then between two), joined where they
        /// follow each other, then the run and what was copied after it
        /// offered to the socket once.
        func settle() {
            if rng.next() % 3 == 0 && !responder.awaited.isEmpty {
                var batch: [UInt8] = []
                var placed: [UInt64: Range<Int>] = [:]
                for (slot, id) in responder.awaited.sorted(by: { $0.slot < $1.slot }) {
                    if rng.next() % 4 == 0 { batch += [0, 0, 0] }
                    let start = batch.count
                    ResponseFrameWriter.appendOK(id: id, field: .logout, body: [], to: &batch)
                    placed[slot] = start..<batch.count
                }
                var out: [UInt8] = []
                var run: FrameRun?
                while let (slot, _) = responder.awaited.popLast() {
                    machine.answerArrived(slot: slot, frame: FrameRun(batch, placed[slot]!), into: &out, run: &run, &responder)
                }
                var open = true
                if let run {
                    let n = min(Int(rng.next() % 61), run.count)
                    written += run.bytes[0..<n]
                    run.withUnsafeBytes { machine.keep($0, written: n, now: now) }
                    open = n == run.count
                }
                let n = out.isEmpty || !open ? 0 : min(Int(rng.next() % 61), out.count)
                written += out[0..<n]
                machine.keep(&out, written: n, now: now)
            }
            while let (slot, id) = responder.awaited.popLast() {
                var frame: [UInt8] = []
                ResponseFrameWriter.appendOK(id: id, field: .logout, body: [], to: &frame)
                if rng.next() % 2 == 0 {
                    machine.answerArrived(slot: slot, frame: frame, &responder)
                } else {
                    var out: [UInt8] = []
                    machine.answerArrived(slot: slot, frame: frame, into: &out, &responder)
                    let n = out.isEmpty ? 0 : min(Int(rng.next() % 61), out.count)
                    written += out[0..<n]
                    machine.keep(&out, written: n, now: now)
                }
            }
            while machine.pendingOutputBytes > 0 {
                let n = min(Int(rng.next() % 61) + 1, machine.pendingOutputBytes)
                // At most the first chunk's bytes: what one write can take.
                let taken = machine.output.withFirstBytes { Array($0.prefix(n)) }
                written += taken
                machine.wrote(taken.count, now: now)
            }
        }

        var offset = 0
        reading: while offset < input.count || machine.decoder.bufferedByteCount > 0 {
            now += 1
            if machine.isReading, offset < input.count {
                let n = min(Int(rng.next() % 61) + 1, input.count - offset)
                var out: [UInt8] = []
                error = machine.bytesArrived(UnsafeRawBufferPointer(rebasing: input[offset..<(offset + n)]), now: now, into: &out, &responder)
                offset += n
                machine.keep(&out, written: 0, now: now)
                if error != nil { break reading }
            } else if machine.resume(now: now) {
                var out: [UInt8] = []
                error = machine.bytesArrived(UnsafeRawBufferPointer(start: nil, count: 0), now: now, into: &out, &responder)
                machine.keep(&out, written: 0, now: now)
                if error != nil { break reading }
            } else if !machine.isReading || offset >= input.count {
                settle()
                let resumed = machine.resume(now: now)
                if machine.closing || !resumed && machine.isReading && offset >= input.count { break reading }
            }
            settle()
        }
        settle()
        // Every answer once, in the order of the frames; a frame over the
        // limit ends the stream with RESOURCE_EXHAUSTED after them.
        var ids: [UInt64] = []
        var codes: [StatusCode] = []
        written.withUnsafeBytes { raw in
            var rest = raw
            while let f = try? Framing.firstFrame(in: rest, maximumFrameBytes: Int(UInt32.max)), f.byteCount > 0 {
                let (id, code) = ResponseFramePeek.idAndStatus(UnsafeRawBufferPointer(rebasing: rest[..<f.byteCount]))
                ids.append(id)
                codes.append(code)
                rest = UnsafeRawBufferPointer(rebasing: rest[f.byteCount...])
            }
        }
        var expected = (0..<responder.frames.count).map { UInt64($0 + 1) }
        if error != nil { expected.append(0) }
        if ids != expected {
            problems.append("the state machine's answers left as ids \(ids.prefix(20)), not \(expected.prefix(20))")
        }
        if error != nil && (codes.last != .resourceExhausted || !machine.closing) {
            problems.append("an over-size frame did not end the stream with RESOURCE_EXHAUSTED")
        }
        return (responder.frames, error, problems)
    }

    // MARK: - Answering

    /// One frame's response frame, as the event loop makes it: the
    /// allocation-free reader first, protobuf-c when it declines, then the
    /// daemon's `Dispatcher`, with the workers run inline (`FuzzExecutors`).
    private func answer(_ frame: [UInt8]) throws(StorageError) -> [UInt8] {
        var out: [UInt8] = []
        let receivedAt = monotonicNanoseconds()
        let executors = FuzzExecutors(harness: self)
        frame.withUnsafeBytes { body in
            if let request = Request.decodeCommonMethod(body) {
                _ = dispatcher.dispatch(request, receivedAt: receivedAt, slot: 0, to: executors, into: &out)
            } else {
                _ = dispatcher.dispatch(frame: body, receivedAt: receivedAt, slot: 0, peerIsOperator: { true }, to: executors, into: &out)
            }
        }
        if let failure = storeFailure {
            storeFailure = nil
            throw failure
        }
        return out
    }

    static func caller(_ id: UInt64) -> Caller {
        switch id % 3 {
        case 0: Caller(uid: 0)
        case 1: Caller(uid: nil)
        default: Caller(uid: ordinaryUID)
        }
    }

    // MARK: - Invariants

    /// One request frame gets exactly one response frame that a client can
    /// read, with the request's id, and either an OK body in the method's own
    /// field or an error status with a message.
    private func check(response out: [UInt8], toFrame frame: [UInt8], index: Int, problems: inout [String]) {
        let request = try? Request.decode(frame)
        // The allocation-free reader must read what protobuf-c reads, or decline.
        if let fast = frame.withUnsafeBytes({ Request.decodeCommonMethod($0) }), fast != request {
            problems.append("frame \(index): the fast reader read \(fast), protobuf-c \(String(describing: request))")
        }
        if let request {
            // Decoding is a projection: what it read encodes and decodes back to itself.
            let again = try? Request.decode(request.encoded())
            if again != request {
                problems.append("frame \(index): the request does not survive encode and decode: \(request) became \(String(describing: again))")
            }
        }
        // Read by hand rather than with FrameDecoder, which is under test
        // and would copy a whole store per answer.
        let announced = out.count < Framing.headerSize ? -1 : out[0..<Framing.headerSize].reduce(0) { $0 << 8 | Int($1) }
        guard announced == out.count - Framing.headerSize else {
            problems.append("frame \(index): the answer is not exactly one whole frame (\(out.count) bytes)")
            return
        }
        let body = out[Framing.headerSize...]
        guard let envelope = Envelope(body) else {
            problems.append("frame \(index): the answer's envelope is not well-formed Protobuf")
            return
        }
        // The whole store with products is a few hundred kilobytes encoded
        // once at start-up; decoding it into Swift values on every run
        // would make the fuzzer ten times slower, for bytes no input changes.
        if body.count <= 32 * 1024 {
            guard let response = try? Response.decode(body) else {
                problems.append("frame \(index): the answer does not decode as a Response")
                return
            }
            if response.id != envelope.id || response.status.code != envelope.code {
                problems.append("frame \(index): protobuf-c and the envelope reader disagree")
            }
            if let request, response.status.code == .ok, !Self.bodyMatches(request.method, response.body) {
                problems.append("frame \(index): \(request.method) answered OK with \(response.body)")
            }
        }
        if let trace {
            let status = envelope.code == .ok ? "OK" : "\(envelope.code): \(envelope.message)"
            trace("  #\(index) \(request.map { "id \($0.id) \(FuzzSeeds.methodName($0.method))" } ?? "unreadable") → \(status)")
        }
        guard let request else {
            if envelope.id != 0 || envelope.code != .invalidArgument {
                problems.append("frame \(index): an unreadable frame got id \(envelope.id) and \(envelope.code)")
            }
            return
        }
        if envelope.id != request.id {
            problems.append("frame \(index): request id \(request.id) answered with id \(envelope.id)")
        }
        if envelope.continues && !(envelope.code == .ok && envelope.bodyFields == [MethodField.watch.rawValue]) {
            problems.append("frame \(index): \(FuzzSeeds.methodName(request.method)) answered with continues set, but not as a watch frame")
        }
        if envelope.code == .ok {
            let expected = request.method.field
            if envelope.bodyFields != [expected].compactMap({ $0?.rawValue }) {
                problems.append("frame \(index): \(FuzzSeeds.methodName(request.method)) answered OK in field(s) \(envelope.bodyFields)")
            }
        } else {
            if envelope.message.isEmpty {
                problems.append("frame \(index): status \(envelope.code) without a message")
            }
            if !envelope.bodyFields.isEmpty {
                problems.append("frame \(index): an error carries a body")
            }
        }
    }

    static func bodyMatches(_ method: RequestMethod, _ body: ResponseBody) -> Bool {
        method.field.map(body.answers) ?? false
    }
}

/// FNV-1a over the input: the chunking seed.
func fnv1a(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
    return h
}
