import GroserServer
import GroserStorage
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

// groserd: parse the command line, open storage, start the loops, and stop
// gracefully on SIGTERM or SIGINT.

let config: ServerConfig
do {
    switch try DaemonArguments.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        StandardStreams.out(DaemonArguments.usage + "\n")
        exit(0)
    case .run(let parsed):
        config = parsed
    }
} catch {
    StandardStreams.err("groserd: \(error)\n")
    exit(2)
}

let logger = Logger.standardError(level: config.logLevel)
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
    let store = try SQLiteCatalogStore(directory: config.dataDirectory)
    logger.info("data in \(store.path)")
    let service = try CatalogService(store: store, imageBaseURL: config.imageBaseURL)
    let created = Server(config: config, service: service, commerceStore: store, logger: logger)
    signals = TerminationSignals { [logger] name in
        logger.info("received \(name)")
        created.shutdown()
    }
    try created.start()
    server = created
} catch {
    logger.error("cannot start: \(error)")
    exit(1)
}

server.waitUntilStopped()
exit(0)
