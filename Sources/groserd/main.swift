import GroserServer
import GroserStorage
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

// groserd: parse the command line, open storage, start the loops, and stop
// gracefully on SIGTERM or SIGINT.

// Before any thread starts, so that every thread inherits it: a SIGTERM at
// any moment waits for the signal thread (TerminationSignals).
TerminationSignals.blockAll()

var config: ServerConfig
do {
    switch try DaemonArguments.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        StandardStreams.out(DaemonArguments.usage + "\n")
        exit(0)
    case .version:
        StandardStreams.out(ProtocolInfo.serverVersion + " (protocol \(ProtocolInfo.version))\n")
        exit(0)
    case .run(let parsed):
        config = parsed
    case .repair(let parsed):
        exit(repairCustomerLog(parsed))
    }
} catch {
    StandardStreams.err("groserd: \(error)\n")
    exit(2)
}

let logger = Logger.standardError(level: config.logLevel, format: config.logFormat)
// Socket activation: systemd (or systemd-socket-activate) passed the
// listening socket; groserd then neither creates nor removes a socket file.
let notifier = Systemd.Notifier()
if let passed = Systemd.passedSockets() {
    let chosen = passed.first { $0.name == "groserd" || $0.name.hasPrefix("groserd.") } ?? passed[0]
    if passed.count > 1 {
        logger.warning("systemd passed \(passed.count) sockets; using descriptor \(chosen.descriptor) (\"\(chosen.name)\")")
    }
    config.activatedListener = chosen
}
// First of all: a socket directory another user could have made or could
// write to is refused before anything else is opened or logged.
do { try Server.prepareSocketDirectory(config) } catch {
    logger.error("cannot start: \(error)")
    exit(1)
}
// Frames of up to --max-frame-bytes come and go: their memory must go back
// to the kernel when they do, or the unfinished-frame budget bounds nothing.
Allocator.mapBlocksSeparately(from: 128 * 1024)
// Room for --max-connections plus the database, the loops and the listener.
let openFiles = ResourceLimits.raiseOpenFiles(to: UInt64(config.maximumConnections) + 64)
if openFiles < UInt64(config.maximumConnections) + 16 {
    logger.warning("the open-file limit is \(openFiles); fewer than --max-connections \(config.maximumConnections) connections will fit")
}
let server: Server
let signals: TerminationSignals
do {
    try Files.makeDirectories(config.dataDirectory, mode: 0o700)
    // The data directory holds customers' orders: only groserd's user may
    // list or enter it, whatever an older version or the umask left.
    if try Files.mode(config.dataDirectory) & 0o077 != 0 {
        logger.warning("narrowing the data directory \(config.dataDirectory) to mode 0700")
        try Files.changeMode(config.dataDirectory, to: 0o700)
    }
    let options = CustomerService.Options(
        directory: config.customerDirectory, shards: config.customerShards, segmentBytes: config.logSegmentBytes,
        lifetimes: CustomerLifetimes(answers: config.idempotencyLifetimeSeconds, idleSessions: config.sessionIdleLifetimeSeconds),
        limits: CartLimits(maximumQuantity: config.maximumQuantity),
        loginThrottle: LoginThrottle.Limits(perAccount: config.loginFailuresPerAccount, perPeer: config.loginFailuresPerPeer,
                                            registrationsPerMinute: config.registrationsPerPeer),
        sessions: config.sessions)
    let created: Server
    if let conninfo = config.postgres {
        // Several groserd share the database: catalog, carts and orders there.
        let health = StoreHealth(.postgresql)
        let store = try PostgresCatalogStore(conninfo: conninfo, seedSampleCatalog: config.seedSampleCatalog, health: health)
        logger.info("data in PostgreSQL (\(PostgresCustomerStore.describe(conninfo)))")
        let service = try CatalogService(store: store, imageBaseURL: config.imageBaseURL)
        let customers = try CustomerService(sharedStore: conninfo, options, catalog: service, orders: store,
                                            products: { (uid) throws(StorageError) in try store.productFacts(uid) }, logger: logger,
                                            health: health)
        created = Server(config: config, service: service, commerceStore: store, catalogStore: store, customers: customers,
                         storeHealth: health, logger: logger)
    } else {
        let store = try SQLiteCatalogStore(directory: config.dataDirectory, seedSampleCatalog: config.seedSampleCatalog)
        logger.info("data in \(store.path)")
        let service = try CatalogService(store: store, imageBaseURL: config.imageBaseURL)
        let customers = try CustomerService(options, catalog: service, orders: store, logger: logger)
        created = Server(config: config, service: service, commerceStore: store, catalogStore: store, customers: customers,
                         logger: logger)
    }
    signals = try TerminationSignals(stop: { [logger] name in
        logger.info("received \(name)")
        notifier.notify("STOPPING=1")
        created.shutdown()
    }, ignored: { [logger] name in
        logger.info("received \(name); ignored (groserd logs to standard error and has no log file to reopen)")
    })
    try created.start()
    server = created
    let catalog = created.service.current
    notifier.notify("READY=1\nMAINPID=\(ProcessInfo.processID)\nSTATUS=listening on \(created.listeningOn); catalog version \(catalog.version)")
    if let interval = notifier.watchdogMicroseconds {
        // Half the interval systemd asked for, and only while every event
        // loop still goes round: a stuck loop lets systemd restart groserd.
        let period = max(1, Int(interval / 2000))
        _ = try? OSThread(name: "groserd-watchdog") {
            while true {
                OSThread.sleep(milliseconds: period)
                if created.loopsAreTurning(waitMilliseconds: min(period, 1000)) {
                    notifier.notify("WATCHDOG=1")
                } else {
                    logger.warning("an event loop did not turn within \(min(period, 1000)) ms; not telling the watchdog")
                }
            }
        }
    }
} catch {
    logger.error("cannot start: \(error)")
    exit(1)
}

server.waitUntilStopped()
exit(0)

/// `groserd --repair`: cuts each shard's log at its first damaged record.
func repairCustomerLog(_ config: ServerConfig) -> Int32 {
    let root = config.customerDirectory
    guard let names = try? LogFile.names(in: root) else {
        StandardStreams.err("groserd: there is no customer log in \(root)\n")
        return 1
    }
    var cut = 0
    for name in names.sorted() where name.hasPrefix("shard-") {
        do {
            let lines = try CustomerLog.repair(directory: root + "/" + name)
            for line in lines { StandardStreams.out(line + "\n") }
            cut += lines.count
        } catch {
            StandardStreams.err("groserd: \(error)\n")
            return 1
        }
    }
    StandardStreams.out(cut == 0 ? "the customer log in \(root) has no damaged record\n"
                                 : "cut \(cut) file(s); groserd will start from what was kept\n")
    return 0
}
