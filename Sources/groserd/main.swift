import GroserServer
import GroserStorage
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

// groserd: parse the command line, prepare the process (signals, socket
// directory, memory, open files), then build and run the `Daemon`, which
// stops gracefully on SIGTERM or SIGINT.

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
let daemon: Daemon
do {
    daemon = try Daemon(config: config, logger: logger)
    try daemon.start(notifier: notifier)
} catch {
    logger.error("cannot start: \(error)")
    exit(1)
}

daemon.waitUntilStopped()
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
