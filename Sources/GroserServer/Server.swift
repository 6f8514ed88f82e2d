import GroserStorage
import GroserSystem
import Synchronization

/// Why the daemon cannot start or run.
public struct ServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// groserd: the listening socket, the event loops, and their lifecycle
/// (notStarted → running → stopping → stopped).
public final class Server: Sendable {
    private enum State {
        case notStarted
        case running(loops: [EventLoop], threads: [OSThread], listener: Socket)
        case stopping
        case stopped
    }

    public let config: ServerConfig
    public let service: CatalogService
    private let workers: Workers
    private let logger: Logger
    private let state = Locked<State>(.notStarted)
    private let stopRequested = Atomic<Bool>(false)
    /// Open connections, per peer uid and in all.
    private let admission: ConnectionAdmission
    private let customers: CustomerService
    /// With a shared PostgreSQL store: follows other hosts' catalog changes.
    private let follower: CatalogFollower?
    /// What Stats says of the store: its kind, state, round trips, conflicts and reconnects.
    public let storeHealth: StoreHealth

    /// - Parameters:
    ///   - service: the catalog the loops answer from.
    ///   - commerceStore: where carts, sessions and orders are written.
    /// - Parameter catalogStore: the store (SQLite's or PostgreSQL's) that takes catalog imports and exports.
    ///   - customers: sessions, carts and checkout (the customer shards).
    ///   - storeHealth: the one the stores and shards were given (by default
    ///     a new one: "postgresql" with `config.postgres`, else "sqlite").
    public init(config: ServerConfig, service: CatalogService, commerceStore: any CommerceStore,
                catalogStore: any CatalogImporting, customers: CustomerService,
                storeHealth: StoreHealth? = nil, logger: Logger) {
        self.config = config
        self.service = service
        self.logger = logger
        self.customers = customers
        let health = storeHealth ?? StoreHealth(config.postgres == nil ? .sqlite : .postgresql)
        self.storeHealth = health
        follower = config.postgres.map { CatalogFollower(conninfo: $0, catalog: service, logger: logger, health: health) }
        let rules = CommerceService(adminUIDs: [ProcessInfo.userID], adminGroup: config.adminGroup,
                                    imageBaseURL: config.imageBaseURL)
        let imports = ImportService(store: catalogStore, catalog: service, isOperator: { rules.isOperator($0) }, logger: logger)
        admission = ConnectionAdmission(limits: PeerConnectionLimits(config), isOperator: { rules.isOperator($0) })
        workers = Workers(customers: customers,
                          commits: CommitQueue(store: commerceStore, service: rules, catalog: service, logger: logger),
                          imports: imports)
    }

    /// Binds the socket and starts the event loops.
    public func start() throws(ServerError) {
        let listener = try bindListener()
        var loops: [EventLoop] = []
        var threads: [OSThread] = []
        do {
            try workers.start()
        } catch {
            listener.close()
            removeSocketFile()
            throw ServerError("cannot start the commit thread: \(error)")
        }
        let unfinished = UnfinishedFrames(limit: config.maximumUnfinishedFrameBytes, loops: max(1, config.threads))
        let handoff = ConnectionHandoff(loops: max(1, config.threads))
        let watches = WatchHub(catalog: service.current, loops: max(1, config.threads))
        service.subscribe({ change in watches.publish(change) }, announce: { watches.wakeLoops() })
        let counters = DaemonCounters(loops: max(1, config.threads), durability: customers.durability, store: storeHealth)
        do {
            for i in 0..<max(1, config.threads) {
                loops.append(try EventLoop(index: i, listener: listener, service: service, workers: workers, config: config,
                                           logger: logger, admission: admission, unfinished: unfinished, handoff: handoff,
                                           watches: watches, counters: counters,
                                           stopping: { [self] in self.stopRequested.load(ordering: .relaxed) }))
            }
            unfinished.attach(wakers: loops.map { loop in { loop.wake() } })
            handoff.attach(wakers: loops.map { loop in { loop.wake() } })
            watches.attach(wakers: loops.map { loop in { loop.wake() } })
            for loop in loops {
                threads.append(try OSThread(name: "groserd-loop\(loop.index)") { loop.run() })
            }
        } catch {
            listener.close()
            removeSocketFile()
            throw ServerError("cannot start the event loops: \(error)")
        }
        state.withLock { $0 = .running(loops: loops, threads: threads, listener: listener) }
        do { try follower?.start() } catch {
            logger.error("cannot start the thread that follows other hosts' catalog changes: \(error)")
        }
        let catalog = service.current
        logger.info("\(ProtocolInfo.serverVersion) listening on \(listeningOn) with \(loops.count) event loop(s); catalog version \(catalog.version), \(catalog.stores.count) stores, \(catalog.stores.values.reduce(0) { $0 + $1.productCount }) products")
    }

    /// What the log says the daemon listens on.
    public var listeningOn: String {
        if let passed = config.activatedListener {
            return "the socket systemd passed (descriptor \(passed.descriptor), \"\(passed.name)\")"
        }
        return config.socketPath
    }

    /// True when every event loop went round its loop since the last call
    /// (it wakes them first): what WATCHDOG=1 vouches for.
    public func loopsAreTurning(waitMilliseconds: Int) -> Bool {
        let loops: [EventLoop] = state.withLock { state in
            guard case .running(let loops, _, _) = state else { return [] }
            return loops
        }
        let before = loops.map { $0.turns }
        for loop in loops { loop.wake() }
        let deadline = monotonicNanoseconds() + UInt64(waitMilliseconds) * 1_000_000
        while monotonicNanoseconds() < deadline {
            if zip(loops, before).allSatisfy({ $0.turns != $1 }) { return true }
            OSThread.sleep(milliseconds: 5)
        }
        return false
    }

    /// Removes the socket file groserd made: not a socket systemd passed
    /// (systemd owns it) nor an abstract one (there is no file).
    private func removeSocketFile() {
        guard config.activatedListener == nil, !Socket.isAbstract(config.socketPath) else { return }
        try? Files.remove(config.socketPath)
    }

    /// Asks the loops to stop: they stop accepting, answer what they have
    /// read, flush and close. Safe from any thread, any number of times.
    public func shutdown() {
        guard !stopRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        logger.info("shutting down")
        // Loops started after this see the flag before their first wait.
        let loops: [EventLoop] = state.withLock { state in
            guard case .running(let loops, _, _) = state else { return [] }
            return loops
        }
        for loop in loops { loop.wake() }
    }

    /// Blocks until the loops have stopped, then closes and removes the socket.
    public func waitUntilStopped() {
        // The state stays `running` while the loops drain, so `shutdown`
        // can still find them to wake.
        let taken: (threads: [OSThread], listener: Socket)? = state.withLock { state in
            guard case .running(_, let threads, let listener) = state else { return nil }
            return (threads, listener)
        }
        guard let (threads, listener) = taken else { return }
        for t in threads { t.join() }
        follower?.stop()
        // The loops waited for their answers; nothing more can be queued.
        workers.stop()
        state.withLock { $0 = .stopping }
        listener.close()
        removeSocketFile()
        state.withLock { $0 = .stopped }
        if config.activatedListener != nil || Socket.isAbstract(config.socketPath) {
            logger.info("stopped")
        } else {
            logger.info("stopped; removed \(config.socketPath)")
        }
    }

    /// Makes sure the socket's directory may hold the socket, creating it
    /// when missing: 0700, or 0710 with the socket group so its members can
    /// reach the socket. The per-user default directory must be a real
    /// directory (checked with lstat, also after creating it), owned by
    /// groserd's user and writable by nobody else; otherwise another user
    /// could have made it, or could later swap the socket for their own. A
    /// named directory (`--socket`, `GROSER_SOCKET`) is the operator's
    /// choice, but one that others may write to needs the sticky bit, as
    /// /tmp has, for the same reason. Every parent of the directory is held
    /// to the same rule (the default's must also belong to groserd's user or
    /// root). Called before the store is opened, so
    /// a refusal is groserd's only line; `start` calls it again.
    public static func prepareSocketDirectory(_ config: ServerConfig) throws(ServerError) {
        // A socket systemd passed, or an abstract one, has no directory of ours.
        if config.activatedListener != nil || Socket.isAbstract(config.socketPath) { return }
        let directory = config.socket.directory
        let policy: SocketDirectory.Policy = config.socket.isExplicit ? .named : .privateTo(owners: [ProcessInfo.userID])
        if case .missing = SocketDirectory.check(directory, policy) {
            do {
                try SocketDirectory.create(directory, mode: config.socketGroup == nil ? 0o700 : 0o710, group: config.socketGroup)
            } catch {
                throw ServerError("cannot create the socket's directory \(directory): \(error)")
            }
        }
        // Its parents too: whoever may write to one could rename the
        // directory away and put their own in its place. The default's
        // parents must belong to this user or root; a named one's to anyone.
        let owners: [UInt32]? = config.socket.isExplicit ? nil : [ProcessInfo.userID, 0]
        var found = SocketDirectory.check(directory, policy)
        if found == .trusted, let problem = SocketDirectory.checkParents(of: directory, owners: owners) { found = .refused(problem) }
        switch found {
        case .trusted: return
        case .missing: throw ServerError("the socket's directory \(directory) vanished after it was created")
        case .refused(let problem):
            var line = "refusing the socket directory: \(problem)"
            switch problem.reason {
            case .symbolicLink, .ownedByAnotherUser, .writableByOthers:
                line += config.socket.isExplicit
                    ? "; another user could replace the socket there: use a directory only you can write to, or one with the sticky bit (chmod +t)"
                    : "; another user could swap the socket for their own: remove it if you did not make it, or name a socket with --socket"
            case .notADirectory, .cannotInspect: break
            }
            throw ServerError(line)
        }
    }

    /// Creates the listening socket, refusing when a live daemon answers on
    /// the path and replacing a stale socket file left by a crash.
    private func bindListener() throws(ServerError) -> Socket {
        let path = config.socketPath
        if let passed = config.activatedListener {
            if let problem = Systemd.problem(withListener: passed.descriptor) {
                throw ServerError("the socket systemd passed cannot be used: \(problem)")
            }
            let socket = Socket(takingOwnershipOf: passed.descriptor)
            do { try socket.setNonBlocking(true) } catch {
                throw ServerError("cannot make the socket systemd passed non-blocking: \(error)")
            }
            return socket
        }
        if Socket.isAbstract(path) {
            switch Result(catching: { () throws(Errno) -> Socket in try Self.listen(path) }) {
            case .success(let socket): return socket
            case .failure(.addressInUse):
                throw ServerError("the abstract socket \(path) is taken: another groserd, or another process of any user, is bound to it")
            case .failure(.nameTooLong): throw ServerError("the abstract socket name \(path) is too long (Linux allows 107 bytes)")
            case .failure(let error): throw ServerError("cannot listen on \(path): \(error)")
            }
        }
        try Self.prepareSocketDirectory(config)
        if Files.exists(path) {
            guard Files.isSocket(path) else {
                throw ServerError("\(path) exists and is not a socket; refusing to replace it")
            }
            if Self.isLive(path) {
                throw ServerError("another groserd is already answering on \(path)")
            }
            logger.info("removing stale socket \(path) left by an earlier run")
            do { try Files.remove(path) } catch {
                throw ServerError("cannot remove the stale socket \(path): \(error)")
            }
        }
        switch Result(catching: { () throws(Errno) -> Socket in try Self.listen(path) }) {
        case .success(let socket):
            if let group = config.socketGroup {
                do { try Accounts.changeGroup(path: path, to: group) } catch {
                    socket.close()
                    try? Files.remove(path)
                    throw ServerError("cannot give the socket \(path) the group \(group): \(error)")
                }
            }
            return socket
        case .failure(.addressInUse): throw ServerError("another groserd is already answering on \(path)")
        case .failure(.nameTooLong): throw ServerError("the socket path \(path) is too long (Linux allows 107 bytes)")
        case .failure(let error): throw ServerError("cannot listen on \(path): \(error)")
        }
    }

    private static func listen(_ path: String) throws(Errno) -> Socket {
        let socket = try Socket.unixStream(nonBlocking: true)
        do {
            try socket.bind(path: path, mode: 0o660)
            try socket.listen(backlog: 1024)
        } catch {
            socket.close()
            throw error
        }
        return socket
    }

    /// True when something accepts connections at `path`.
    static func isLive(_ path: String) -> Bool {
        guard let probe = try? Socket.unixStream(nonBlocking: false) else { return false }
        defer { probe.close() }
        do {
            try probe.connect(path: path)
            return true
        } catch {
            return false
        }
    }
}
