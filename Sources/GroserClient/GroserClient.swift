@_exported import GroserWire
import Dispatch
import GroserSystem

/// A connection to groserd. Safe to share between threads and tasks: calls
/// are serialised on one connection, which is opened on first use and
/// reopened after a failure. A call that fails on a connection kept from an
/// earlier call (a daemon restart closes it) is sent once more on a new one,
/// when sending it twice cannot change anything twice: reads, and mutations
/// that carry an idempotency key.
public final class GroserClient: Sendable {
    /// The socket this client talks to.
    public var socketPath: String { location.path }
    /// The socket, and whether it was named or is the per-user default.
    public let location: SocketLocation
    /// The timeout of calls that do not give their own, in seconds.
    public let defaultTimeout: Double

    private struct State {
        var socket: Socket?
        var decoder = FrameDecoder(maximumFrameBytes: 256 * 1024 * 1024)
        var nextID: UInt64 = 1
    }

    private let state = Locked(State())

    /// A client of the socket at `location`. When it is the per-user
    /// default, its directory is checked before every connection, as
    /// groserd checks it: a directory that is a symbolic link, belongs to
    /// someone other than this user or root, or that group or others may
    /// write to is refused (`GroserError.untrustedSocketDirectory`).
    /// - Parameters:
    ///   - location: the socket; see `SocketLocation.fromEnvironment()`.
    ///   - timeout: seconds a call may take unless it says otherwise.
    public init(location: SocketLocation, timeout: Double = 10) {
        self.location = location
        self.defaultTimeout = timeout
    }

    /// A client of groserd's default socket: `$GROSER_SOCKET` (used as
    /// given), else the per-user default (its directory checked).
    public convenience init(timeout: Double = 10) {
        self.init(location: .fromEnvironment(), timeout: timeout)
    }

    /// A client of the socket at `socketPath`, used as given.
    public convenience init(socketPath: String, timeout: Double = 10) {
        self.init(location: SocketLocation(path: socketPath, isExplicit: true), timeout: timeout)
    }

    /// `$GROSER_SOCKET`, else `$XDG_RUNTIME_DIR/groser/groserd.sock`, else
    /// `/tmp/groser-<uid>/groserd.sock`: the same place groserd listens by default.
    public static func defaultSocketPath() -> String { SocketLocation.fromEnvironment().path }

    /// Closes the connection; the next call opens a new one.
    public func close() {
        state.withLock { reset(&$0) }
    }

    // MARK: Blocking calls

    /// The server's version, uptime, catalog version and methods.
    public func serverInfo(timeout: Double? = nil) throws(GroserError) -> ServerInfo {
        guard case .serverInfo(let v) = try call(.serverInfo, timeout: timeout) else { throw Self.mismatch("ServerInfo") }
        return v
    }

    /// Every city with its stores and default store, ordered by code.
    public func listCities(timeout: Double? = nil) throws(GroserError) -> CityList {
        guard case .listCities(let v) = try call(.listCities, timeout: timeout) else { throw Self.mismatch("ListCities") }
        return v
    }

    /// A store's departments and shelves (and products, when asked); a city
    /// selects its default store.
    public func store(_ selector: StoreSelector, includeProducts: Bool = false,
                      timeout: Double? = nil) throws(GroserError) -> StoreCatalog {
        let method = RequestMethod.getStore(selector: selector, includeProducts: includeProducts)
        guard case .getStore(let v) = try call(method, timeout: timeout) else { throw Self.mismatch("GetStore") }
        return v
    }

    /// One shelf with its products sorted by name.
    public func shelf(_ uid: String, timeout: Double? = nil) throws(GroserError) -> ShelfContents {
        guard case .getShelf(let v) = try call(.getShelf(shelfUID: uid), timeout: timeout) else { throw Self.mismatch("GetShelf") }
        return v
    }

    /// Sends one request and waits for its response body.
    public func call(_ method: RequestMethod, timeout: Double? = nil) throws(GroserError) -> ResponseBody {
        let seconds = timeout ?? defaultTimeout
        let response = try roundTrip(method, timeout: seconds)
        guard response.status.isOK else { throw .server(response.status) }
        return response.body
    }

    // MARK: Async calls (Swift concurrency)

    /// The server's version, uptime, catalog version and methods.
    public func serverInfo(timeout: Double? = nil) async throws -> ServerInfo {
        try await offload { () throws(GroserError) in try self.serverInfo(timeout: timeout) }
    }

    /// Every city with its stores and default store, ordered by code.
    public func listCities(timeout: Double? = nil) async throws -> CityList {
        try await offload { () throws(GroserError) in try self.listCities(timeout: timeout) }
    }

    /// A store's catalog; a city selects its default store.
    public func store(_ selector: StoreSelector, includeProducts: Bool = false,
                      timeout: Double? = nil) async throws -> StoreCatalog {
        try await offload { () throws(GroserError) in
            try self.store(selector, includeProducts: includeProducts, timeout: timeout)
        }
    }

    /// One shelf with its products sorted by name.
    public func shelf(_ uid: String, timeout: Double? = nil) async throws -> ShelfContents {
        try await offload { () throws(GroserError) in try self.shelf(uid, timeout: timeout) }
    }

    /// Runs a blocking call on a Dispatch thread, so no thread of the
    /// cooperative pool ever waits on the socket.
    func offload<T: Sendable>(_ body: @escaping @Sendable () throws(GroserError) -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result(catching: body))
            }
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
                // by a daemon restart: try once more on a new one.
                if reused, case .transport = error, safeToRetry {
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
        let budget = UInt32(clamping: Int(seconds * 1000))
        let frame = Framing.frame(encode(id, budget))
        try send(frame, on: socket, seconds: seconds, deadline: deadline)
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

    /// A new connection to the socket, its directory checked first when it
    /// is the per-user default.
    func openSocket() throws(GroserError) -> Socket {
        if !location.isExplicit,
           case .refused(let problem) = SocketDirectory.check(location.directory, .privateTo(owners: [ProcessInfo.userID, 0])) {
            switch problem.reason {
            case .symbolicLink, .ownedByAnotherUser, .writableByOthers:
                throw .untrustedSocketDirectory(path: socketPath, reason: problem.description)
            case .notADirectory, .cannotInspect:
                break  // nothing can listen there; connect says why below
            }
        }
        switch Result(catching: { () throws(Errno) -> Socket in try Self.open(socketPath) }) {
        case .success(let socket):
            return socket
        case .failure(let error):
            throw .cannotConnect(path: socketPath, reason: error.description)
        }
    }

    private static func open(_ path: String) throws(Errno) -> Socket {
        let socket = try Socket.unixStream(nonBlocking: false)
        do {
            try socket.connect(path: path)
            try socket.setNonBlocking(true)
        } catch {
            socket.close()
            throw error
        }
        return socket
    }

    private func remaining(_ deadline: UInt64, _ seconds: Double) throws(GroserError) -> Int32 {
        let now = monotonicNanoseconds()
        guard now < deadline else { throw .timedOut(seconds: seconds) }
        return Int32(clamping: (deadline - now) / 1_000_000 + 1)
    }

    func send(_ frame: [UInt8], on socket: Socket, seconds: Double, deadline: UInt64) throws(GroserError) {
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
            var outcome = IOResult.wouldBlock
            var failure: Errno?
            _ = decoder.writeTail(capacity: 64 * 1024) { raw -> Int in
                switch Result(catching: { () throws(Errno) -> IOResult in try socket.read(into: raw) }) {
                case .success(let r): outcome = r
                case .failure(let e): failure = e
                }
                if case .processed(let n) = outcome { return n }
                return 0
            }
            if let failure { throw .transport("cannot receive: \(failure)") }
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
    /// True when sending the request twice cannot apply a change twice.
    public var isSafeToRetry: Bool {
        switch self {
        case .addItem(let m, _, _), .setQuantity(let m, _, _), .removeItem(let m, _): return !m.idempotencyKey.isEmpty
        case .clearCart(let m): return !m.idempotencyKey.isEmpty
        case .checkout(let d): return !d.idempotencyKey.isEmpty
        default: return true
        }
    }
}
