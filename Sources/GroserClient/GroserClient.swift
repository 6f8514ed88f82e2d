@_exported import GroserWire
import Dispatch
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// A client of groserd. Safe to share between threads and tasks.
///
/// Async calls (`try await client.listCities()`) are pipelined: many calls
/// are in flight at once on at most `maxConnections` connections, each
/// read by one thread of its own, and answers are matched to calls by id
/// in whatever order they come. No thread waits per call; a cancelled task
/// stops waiting at once (`GroserError.cancelled`); timeouts are `Duration`s.
///
/// Blocking calls (`try client.listCities()`, for code outside Swift
/// concurrency) are serialised on one connection of their own.
///
/// Connections are opened on first use and reopened after a failure. A
/// call that fails on a connection kept from an earlier call (a daemon
/// restart closes it) is sent once more on a new one, when sending it twice
/// cannot change anything twice: reads, and mutations that carry an
/// idempotency key.
public final class GroserClient: Sendable {
    /// The socket this client talks to.
    public var socketPath: String { location.path }
    /// The socket, and whether it was named or is the per-user default.
    public let location: SocketLocation
    /// The timeout of calls that do not give their own, in seconds.
    public let defaultTimeout: Double
    /// At most this many connections carry the async calls.
    public let maxConnections: Int
    /// Told about every blocking call and every stream opened: what a
    /// `-v` flag prints. Nil for no tracing.
    public let trace: (@Sendable (CallTrace) -> Void)?
    /// The async calls' connections.
    private let pool = Locked<[PipelinedConnection]>([])

    private struct State {
        var socket: Socket?
        var decoder = FrameDecoder(maximumFrameBytes: 256 * 1024 * 1024)
        var nextID: UInt64 = 1
        /// The last request's frame did not all go out, so groserd cannot
        /// have run it (a connection closed as idle, or refused).
        var undelivered = false
    }

    private let state = Locked(State())

    /// A client of the socket at `location`. When it is the per-user
    /// default, its directory is checked before every connection, as
    /// groserd checks it: a directory that is a symbolic link, belongs to
    /// someone other than this user or root, or that group or others may
    /// write to is refused (`GroserError.untrustedSocketDirectory`), and a
    /// missing one means no daemon runs (`.notRunning`). At every location
    /// a server run by a uid other than this user's, root's or
    /// `location.expectedServerUID` is refused before a byte is sent
    /// (`.untrustedServer`); see `connect(to:)`.
    /// - Parameters:
    ///   - location: the socket; see `SocketLocation.fromEnvironment()`.
    ///   - timeout: seconds a call may take unless it says otherwise.
    ///   - maxConnections: how many connections async calls may spread over.
    ///   - trace: told about each blocking call and stream (`CallTrace`).
    public init(location: SocketLocation, timeout: Double = 10, maxConnections: Int = 2,
                trace: (@Sendable (CallTrace) -> Void)? = nil) {
        self.location = location
        self.defaultTimeout = timeout
        self.maxConnections = max(1, maxConnections)
        self.trace = trace
    }

    deinit {
        for c in pool.withLock({ $0 }) { c.close() }
    }

    /// A client of groserd's default socket: `$GROSER_SOCKET` (used as
    /// given), else the per-user default (its directory checked).
    public convenience init(timeout: Double = 10, trace: (@Sendable (CallTrace) -> Void)? = nil) {
        self.init(location: .fromEnvironment(), timeout: timeout, trace: trace)
    }

    /// A client of the socket at `socketPath`, used as given; the server
    /// must run as this user, root or `expectedServerUID`.
    public convenience init(socketPath: String, expectedServerUID: UInt32? = nil, timeout: Double = 10, maxConnections: Int = 2,
                            trace: (@Sendable (CallTrace) -> Void)? = nil) {
        self.init(location: SocketLocation(path: socketPath, isExplicit: true, expectedServerUID: expectedServerUID),
                  timeout: timeout, maxConnections: maxConnections, trace: trace)
    }

    /// `$GROSER_SOCKET`, else `$XDG_RUNTIME_DIR/groser/groserd.sock`, else
    /// `/tmp/groser-<uid>/groserd.sock`: the same place groserd listens by default.
    public static func defaultSocketPath() -> String { SocketLocation.fromEnvironment().path }

    /// Closes the connections (calls in flight fail); the next call opens a new one.
    public func close() {
        state.withLock { reset(&$0) }
        for c in pool.withLock({ p in defer { p = [] }; return p }) { c.close() }
    }

    // MARK: Blocking calls

    /// Sends one request and waits for its response body.
    public func call(_ method: RequestMethod, timeout: Double? = nil) throws(GroserError) -> ResponseBody {
        let seconds = timeout ?? defaultTimeout
        let response = try roundTrip(method, timeout: seconds)
        guard response.status.isOK else { throw .server(response.status) }
        return response.body
    }

    // MARK: Async calls (Swift concurrency)

    /// Sends one request and waits for its response body, pipelined with
    /// the client's other async calls.
    public func call(_ method: RequestMethod, timeout: Duration? = nil) async throws(GroserError) -> ResponseBody {
        let seconds = timeout.map(Self.seconds) ?? defaultTimeout
        var (connection, reused) = try pooledConnection()
        var result = await connection.call(method, seconds: seconds)
        if case .failure(.transport) = result, reused, method.isSafeToRetry {
            // The connection may have been closed by a daemon restart since
            // it last answered: once more on a new one.
            (connection, reused) = try pooledConnection()
            result = await connection.call(method, seconds: seconds)
        }
        let response = try result.get()
        guard response.status.isOK else { throw .server(response.status) }
        return response.body
    }

    /// The answer of `method`, taken out of its body by `extract`.
    func answer<T>(_ method: RequestMethod, _ timeout: Duration?, _ name: String,
                   _ extract: (ResponseBody) -> T?) async throws(GroserError) -> T {
        guard let value = extract(try await call(method, timeout: timeout)) else { throw Self.mismatch(name) }
        return value
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// A connection for an async call, and whether it answered calls
    /// before this one: an idle one first, else a new one while there are
    /// fewer than `maxConnections`, else the least busy.
    private func pooledConnection() throws(GroserError) -> (PipelinedConnection, reused: Bool) {
        try pool.withLock { (p) throws(GroserError) -> (PipelinedConnection, reused: Bool) in
            p.removeAll { !$0.isOpen }
            let loads = p.map(\.inFlight)
            if let idle = loads.firstIndex(of: 0) { return (p[idle], p[idle].hasAnswered) }
            if p.count < maxConnections {
                let c = try PipelinedConnection(socket: openSocket())
                p.append(c)
                return (c, false)
            }
            let least = loads.indices.min { loads[$0] < loads[$1] }!
            return (p[least], p[least].hasAnswered)
        }
    }

    // MARK: The wire

    static func mismatch(_ method: String) -> GroserError {
        .transport("the server answered \(method) with another method's body")
    }

    private func roundTrip(_ method: RequestMethod, timeout seconds: Double) throws(GroserError) -> Response {
        try roundTrip(safeToRetry: method.isSafeToRetry, timeout: seconds) { id, budget in
            Request(id: id, deadlineMilliseconds: budget, method: method).encoded()
        }.response
    }

    /// Sends the request `encode` makes for an id and a deadline budget, and
    /// waits for its answer: the response read, and its encoding as it came.
    func roundTrip(safeToRetry: Bool, timeout seconds: Double,
                   encode: (UInt64, UInt32) -> [UInt8]) throws(GroserError) -> (response: Response, bytes: [UInt8]) {
        let deadline = monotonicNanoseconds() + UInt64(max(0, seconds) * 1e9)
        return try state.withLock { (s) throws(GroserError) -> (response: Response, bytes: [UInt8]) in
            let reused = s.socket != nil
            var result = Result { () throws(GroserError) -> (response: Response, bytes: [UInt8]) in
                try exchange(&s, encode, seconds: seconds, deadline: deadline)
            }
            if case .failure(let error) = result {
                // After a failure the stream may hold half a frame: start afresh.
                reset(&s)
                // A connection kept from an earlier call may have been closed
                // by a daemon restart or as idle: try once more on a new one,
                // when running it twice cannot change anything twice or it
                // never all went out (then groserd did not run it).
                if reused, case .transport = error, safeToRetry || s.undelivered {
                    result = Result { () throws(GroserError) -> (response: Response, bytes: [UInt8]) in
                        try exchange(&s, encode, seconds: seconds, deadline: deadline)
                    }
                    if case .failure = result { reset(&s) }
                }
            }
            return try result.get()
        }
    }

    private func exchange(_ s: inout State, _ encode: (UInt64, UInt32) -> [UInt8], seconds: Double,
                          deadline: UInt64) throws(GroserError) -> (response: Response, bytes: [UInt8]) {
        let socket = try connected(&s)
        let id = s.nextID
        s.nextID &+= 1
        let budget = Self.deadlineBudget(seconds)
        let frame = Framing.frame(encode(id, budget))
        let started = monotonicNanoseconds()
        var outcome: Result<Status, GroserError> = .failure(.cancelled)
        defer {
            trace?(CallTrace(socketPath: socketPath, requestID: id, deadlineMilliseconds: budget,
                             elapsedNanoseconds: monotonicNanoseconds() - started, outcome: outcome))
        }
        do {
            let answer = try exchangeFrame(&s, socket, frame, id, seconds: seconds, deadline: deadline)
            outcome = .success(answer.response.status)
            return answer
        } catch {
            outcome = .failure(error)
            throw error
        }
    }

    /// A refusal (`{id: 0, status}` not OK) that groserd sent before closing
    /// the connection, if one is already in the socket; nothing is waited for.
    private func waitingRefusal(_ s: inout State, _ socket: Socket) -> (response: Response, bytes: [UInt8])? {
        while case .processed(let n) = (try? socket.read(into: &s.decoder)) ?? .processed(0), n > 0 {}
        guard let next = try? s.decoder.next() else { return nil }
        let body = Array(next)
        guard let response = try? Response.decode(body), response.id == 0, !response.status.isOK else { return nil }
        return (response, body)
    }

    /// The deadline sent for a timeout of `seconds`: milliseconds, rounded
    /// up, so that a timeout under 1 ms is never sent as 0, which the
    /// protocol reads as "no deadline".
    static func deadlineBudget(_ seconds: Double) -> UInt32 {
        guard seconds > 0 else { return 1 }
        return UInt32(clamping: max(1, Int((seconds * 1000).rounded(.up))))
    }

    private func exchangeFrame(_ s: inout State, _ socket: Socket, _ frame: [UInt8], _ id: UInt64, seconds: Double,
                               deadline: UInt64) throws(GroserError) -> (response: Response, bytes: [UInt8]) {
        s.undelivered = false
        do {
            try send(frame, on: socket, seconds: seconds, deadline: deadline)
        } catch {
            s.undelivered = true
            // groserd may have refused the connection with a sentence before
            // closing it (too many connections, from this uid or in all):
            // that sentence, not "Broken pipe", is the answer.
            if let refusal = waitingRefusal(&s, socket) { return refusal }
            throw error
        }
        while true {
            let body: [UInt8]
            do {
                if let next = try s.decoder.next() {
                    body = Array(next)
                } else {
                    try receive(into: &s.decoder, on: socket, seconds: seconds, deadline: deadline)
                    continue
                }
            } catch let error as FrameError {
                throw .transport("the server sent an unreadable frame (\(error))")
            } catch let error as GroserError {
                throw error
            } catch {
                throw .transport("\(error)")
            }
            let response: Response
            do { response = try Response.decode(body) } catch {
                throw .transport("the server sent a frame that is not a groser.v1.Response")
            }
            // id 0 answers a frame the server could not read, or is a frame
            // the server sent unasked; neither is ours unless it is an error.
            if response.id == id { return (response, body) }
            if response.id == 0 && !response.status.isOK { return (response, body) }
        }
    }

    private func reset(_ s: inout State) {
        s.socket?.close()
        s.socket = nil
        s.decoder = FrameDecoder(maximumFrameBytes: 256 * 1024 * 1024)
    }

    private func connected(_ s: inout State) throws(GroserError) -> Socket {
        if let socket = s.socket { return socket }
        let socket = try openSocket()
        s.socket = socket
        return socket
    }

    /// A new connection to the socket (non-blocking), made by `connect(to:)`.
    func openSocket() throws(GroserError) -> Socket {
        let socket = try Self.connect(to: location)
        do { try socket.setNonBlocking(true) } catch {
            socket.close()
            throw .cannotConnect(path: socketPath, errno: error)
        }
        return socket
    }

    /// A blocking connection to groserd at `location`, checked before a
    /// byte is sent, so that another user's socket never hears a request:
    ///
    /// - the per-user default directory is opened `O_NOFOLLOW` and checked
    ///   through its descriptor (a directory owned by this user or root,
    ///   writable by nobody else, under parents only they may change), and
    ///   the socket is reached through that same descriptor, so a rename
    ///   between check and connect cannot swap it; a missing directory is
    ///   `.notRunning`, never a connect;
    /// - then, for every location, named ones too (a socket named in a
    ///   sticky /tmp can still be someone else's), the server's uid
    ///   (SO_PEERCRED) must be this user's, root's or
    ///   `location.expectedServerUID`; any other is `.untrustedServer`.
    public static func connect(to location: SocketLocation) throws(GroserError) -> Socket {
        let path = location.path
        var target = path
        var directory: Int32 = -1
        defer { if directory >= 0 { _ = Glibc.close(directory) } }
        if !location.isExplicit && !Socket.isAbstract(path) {
            switch SocketDirectory.open(location.directory, owners: [ProcessInfo.userID, 0]) {
            case .opened(let fd):
                directory = fd
                target = "/proc/self/fd/\(fd)/" + location.fileName
            case .missing:
                throw .notRunning(directory: location.directory)
            case .refused(let problem):
                switch problem.reason {
                case .symbolicLink, .ownedByAnotherUser, .writableByOthers:
                    throw .untrustedSocketDirectory(path: path, reason: problem.description)
                case .notADirectory:
                    throw .cannotConnect(path: path, errno: Errno(rawValue: ENOTDIR))
                case .cannotInspect(let error):
                    throw .cannotConnect(path: path, errno: error)
                }
            }
        }
        let socket: Socket
        do {
            socket = try Socket.unixStream(nonBlocking: false)
        } catch {
            throw .cannotConnect(path: path, errno: error)
        }
        do {
            try socket.connect(path: target)
        } catch {
            socket.close()
            throw .cannotConnect(path: path, errno: error)
        }
        let accepted = location.acceptedServerUIDs
        let peer: PeerCredentials
        do { peer = try socket.peerCredentials() } catch {
            socket.close()
            throw .transport("cannot read the credentials of the server at \(path): \(error)")
        }
        guard accepted.contains(peer.uid) else {
            socket.close()
            throw .untrustedServer(path: path, uid: peer.uid, expected: accepted)
        }
        return socket
    }

    private func remaining(_ deadline: UInt64, _ seconds: Double) throws(GroserError) -> Int32 {
        try Self.remaining(deadline, seconds)
    }

    private static func remaining(_ deadline: UInt64, _ seconds: Double) throws(GroserError) -> Int32 {
        let now = monotonicNanoseconds()
        guard now < deadline else { throw .timedOut(seconds: seconds) }
        return Int32(clamping: (deadline - now) / 1_000_000 + 1)
    }

    func send(_ frame: [UInt8], on socket: Socket, seconds: Double, deadline: UInt64) throws(GroserError) {
        try Self.sendFrame(frame, on: socket, seconds: seconds, deadline: deadline)
    }

    /// Writes all of `frame` to a non-blocking socket, waiting while it is
    /// full, until `deadline`.
    static func sendFrame(_ frame: [UInt8], on socket: Socket, seconds: Double, deadline: UInt64) throws(GroserError) {
        var offset = 0
        while offset < frame.count {
            let result = frame.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in try socket.write(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }
            switch result {
            case .success(.processed(let n)): offset += n
            case .success(.wouldBlock):
                let wait = try remaining(deadline, seconds)
                _ = try? socket.poll(forWriting: true, timeoutMilliseconds: wait)
            case .failure(let e): throw .transport("cannot send: \(e)")
            }
        }
    }

    func receive(into decoder: inout FrameDecoder, on socket: Socket, seconds: Double,
                         deadline: UInt64) throws(GroserError) {
        while true {
            let outcome: IOResult
            do { outcome = try socket.read(into: &decoder) } catch { throw .transport("cannot receive: \(error)") }
            switch outcome {
            case .processed(0): throw .transport("groserd closed the connection")
            case .processed: return
            case .wouldBlock:
                let wait = try remaining(deadline, seconds)
                _ = try? socket.poll(timeoutMilliseconds: wait)
            }
        }
    }
}

extension RequestMethod {
    /// True when sending the request twice cannot apply a change twice, as
    /// the method registry says (`MethodInfo.retry`): a read or a change
    /// given whole; a change with its idempotency key set; never a method a
    /// resend would run again (OpenSession, Register, Logout, CancelWatch).
    /// A method this build does not know is refused unrun: safe.
    public var isSafeToRetry: Bool {
        guard let field else { return true }
        switch field.info.retry {
        case .safe: return true
        case .unsafe: return false
        case .withIdempotencyKey: return !idempotencyKey.isEmpty
        }
    }

    /// The request's idempotency key ("" for none, and for a method without one).
    var idempotencyKey: String {
        switch self {
        case .addItem(let m, _, _), .setQuantity(let m, _, _), .removeItem(let m, _), .clearCart(let m): m.idempotencyKey
        case .checkout(let d): d.idempotencyKey
        case .login(let d): d.idempotencyKey
        default: ""
        }
    }
}

/// Runs `body` with a client of `location` and closes the client's
/// connections when `body` returns or throws, so none outlives the scope
/// (calls still in flight from tasks `body` started fail with a transport
/// error).
public func withGroserClient<T>(location: SocketLocation = .fromEnvironment(), timeout: Double = 10, maxConnections: Int = 2,
                                _ body: (GroserClient) async throws -> T) async rethrows -> T {
    let client = GroserClient(location: location, timeout: timeout, maxConnections: maxConnections)
    defer { client.close() }
    return try await body(client)
}

extension Socket {
    /// Reads what has arrived, up to 64 KiB, into the free tail of
    /// `decoder`'s buffer (no copy); `.processed(0)` is the end of the stream.
    func read(into decoder: inout FrameDecoder) throws(Errno) -> IOResult {
        var outcome = IOResult.wouldBlock
        _ = try decoder.writeTail(capacity: 64 * 1024) { (raw) throws(Errno) -> Int in
            outcome = try read(into: raw)
            if case .processed(let n) = outcome { return n }
            return 0
        }
        return outcome
    }
}
