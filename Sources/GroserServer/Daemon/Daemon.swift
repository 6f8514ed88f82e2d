import GroserStorage
import GroserSystem

/// groserd's composition root: builds, from a `ServerConfig`, the store
/// (through a `StoreBackend`), the catalog, the customer shards and the
/// server with its workers and event loops; runs them with the signal
/// thread and systemd's notifications; and stops them in order (the
/// loops, then the follower and the workers: `Server.waitUntilStopped`).
public final class Daemon: Sendable {
    public let server: Server
    private let logger: Logger
    /// The signal thread, once started.
    private let signals = Locked<TerminationSignals?>(nil)

    /// Opens the data directory and the store and loads the catalog and
    /// the customers' state; starts nothing yet.
    public init(config: ServerConfig, logger: Logger) throws {
        self.logger = logger
        try Files.makeDirectories(config.dataDirectory, mode: 0o700)
        // The data directory holds customers' orders: only groserd's user may
        // list or enter it, whatever an older version or the umask left.
        if try Files.mode(config.dataDirectory) & 0o077 != 0 {
            logger.warning("narrowing the data directory \(config.dataDirectory) to mode 0700")
            try Files.changeMode(config.dataDirectory, to: 0o700)
        }
        let backend = try StoreBackend.open(config, logger: logger)
        let service = try CatalogService(store: backend.store, imageBaseURL: config.imageBaseURL)
        let customers = try backend.makeCustomers(Self.customerOptions(config), service, logger)
        server = Server(config: config, service: service, commerceStore: backend.store, catalogStore: backend.store,
                        customers: customers, storeHealth: backend.health, logger: logger)
    }

    /// The customer shards' settings from the command line.
    static func customerOptions(_ config: ServerConfig) -> CustomerService.Options {
        CustomerService.Options(
            directory: config.customerDirectory, shards: config.customerShards, segmentBytes: config.logSegmentBytes,
            lifetimes: CustomerLifetimes(answers: config.idempotencyLifetimeSeconds, idleSessions: config.sessionIdleLifetimeSeconds),
            limits: CartLimits(maximumQuantity: config.maximumQuantity),
            loginThrottle: LoginThrottle.Limits(perAccount: config.loginFailuresPerAccount, perPeer: config.loginFailuresPerPeer,
                                                registrationsPerMinute: config.registrationsPerPeer),
            sessions: config.sessions)
    }

    /// Starts the signal thread (SIGTERM, SIGINT and SIGQUIT stop groserd
    /// gracefully), the workers and the loops; tells systemd it is ready and,
    /// when asked, keeps its watchdog fed. Throws when any of them cannot start.
    public func start(notifier: Systemd.Notifier) throws {
        let server = self.server
        let logger = self.logger
        let signals = try TerminationSignals(stop: { name in
            logger.info("received \(name)")
            notifier.notify("STOPPING=1")
            server.shutdown()
        }, ignored: { name in
            logger.info("received \(name); ignored (groserd logs to standard error and has no log file to reopen)")
        })
        self.signals.withLock { $0 = signals }
        try server.start()
        let catalog = server.service.current
        notifier.notify("READY=1\nMAINPID=\(ProcessInfo.processID)\nSTATUS=listening on \(server.listeningOn); catalog version \(catalog.version)")
        if let interval = notifier.watchdogMicroseconds {
            // Half the interval systemd asked for, and only while every event
            // loop still goes round: a stuck loop lets systemd restart groserd.
            let period = max(1, Int(interval / 2000))
            _ = try? OSThread(name: "groserd-watchdog") {
                while true {
                    OSThread.sleep(milliseconds: period)
                    if server.loopsAreTurning(waitMilliseconds: min(period, 1000)) {
                        notifier.notify("WATCHDOG=1")
                    } else {
                        logger.warning("an event loop did not turn within \(min(period, 1000)) ms; not telling the watchdog")
                    }
                }
            }
        }
    }

    /// Blocks until a signal stopped the loops, then stops the rest in order.
    public func waitUntilStopped() { server.waitUntilStopped() }
}
