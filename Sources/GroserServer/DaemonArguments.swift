import GroserSystem

/// groserd's command line.
public enum DaemonArguments {
    public static let usage = """
    usage: groserd [options]

    Serves the groser grocery catalog over a Unix domain socket.

    options:
      --socket PATH            socket to listen on (default: $GROSER_SOCKET, else
                               $XDG_RUNTIME_DIR/groser/groserd.sock, else /tmp/groser-UID/groserd.sock);
                               @NAME is an abstract socket (no file). A socket passed by
                               systemd (LISTEN_FDS) is used instead
      --data DIR               data directory holding groser.sqlite3 (default:
                               $XDG_DATA_HOME/groser, else ~/.local/share/groser)
      --store STORE            where the catalog, carts and orders live: "sqlite" (default:
                               groser.sqlite3 and the customer log in --data), or a
                               PostgreSQL database several groserd share, as a libpq URI
                               (postgres://…) or conninfo ("host=/run/postgresql dbname=groser")
      --image-base-url URL     scheme://host:port put before relative image URLs
                               (default: http://localhost:8080)
      --max-frame-bytes N      largest accepted frame body (default: 4194304)
      --threads N              event loop threads (default: one per core)
      --max-connections N      connections open at once; more get UNAVAILABLE (default: 4096);
                               the last 64 (or a sixteenth, if less) are kept for groserd's
                               user, root and --admin-group
      --max-connections-per-uid N
                               connections one peer uid may hold (operators excepted); more
                               get RESOURCE_EXHAUSTED (default: a quarter of --max-connections)
      --max-pending-output-bytes N
                               unsent answer bytes above which a client's requests are
                               no longer read until it catches up (default: 1048576)
      --slow-reader-timeout S  cut off a client that reads none of its answers for S
                               seconds (default: 10)
      --idle-timeout S         close connections with no watch idle for S seconds; 0: never
                               (default: 300)
      --frame-read-timeout S   close a connection whose frame has not all arrived S seconds
                               after it began (default: 5)
      --max-unfinished-frame-bytes N
                               bytes all connections may hold in frames still arriving;
                               above it the largest holders are closed first (default:
                               67108864; keep it above --max-frame-bytes)
      --max-quantity N         most units of one product in a cart line (default: 99)
      --socket-group GROUP     group of the socket file (mode 0660): who may connect
      --admin-group GROUP      members may change the catalog (besides groserd's user and root)
      --empty-catalog          a new data directory starts with no catalog (for
                               admin import) instead of the sample catalog
      --customer-shards N      shards holding sessions and carts, each with its own thread
                               and log; fixed when the data directory is new (default: 2)
      --idempotency-lifetime D how long an idempotency key's answer is kept, e.g. 24h,
                               90m, 7d, 30s (default: 24h)
      --session-idle-lifetime D
                               sessions unused this long are removed with their carts
                               (orders stay) (default: 30d)
      --session-open-rate N    OpenSession calls one peer uid may make per second; 0: no
                               limit (default: 50)
      --session-open-burst N   how many of them may come at once (default: 200)
      --max-sessions N         sessions (and accounts) stored at most; a session is stored
                               at its first change, which past this is refused; anonymous
                               ones take nine tenths, one uid at most a quarter (default: 500000)
      --login-failures-per-account N
                               failed logins of one account before each further try
                               must wait, doubling from 1 s to 15 min; 0: no limit (default: 5)
      --login-failures-per-peer N
                               the same per peer uid, counted over all accounts (default: 50)
      --registrations-per-peer N
                               registrations one peer uid may make a minute; 0: no limit
                               (default: 20)
      --log-segment-bytes N    customer log segment size at which a checkpoint folds it
                               into the snapshot (default: 67108864)
      --repair                 cut each customer log file at its first damaged record
                               (what is cut is lost), report, and exit
      --log-level LEVEL        debug, info, warning or error (default: info); debug logs
                               one line per request
      --log-format FORMAT      text or json (one object per line) (default: text)
      --version                print the version and exit
      -h, --help               show this help
    """

    /// What the command line asks for.
    public enum Parsed: Sendable {
        case run(ServerConfig)
        case help
        case version
        /// `--repair`: the data directory whose customer log to repair.
        case repair(ServerConfig)
    }

    /// Parses `arguments` (without the program name).
    public static func parse(_ arguments: [String]) throws(ServerError) -> Parsed {
        var config = ServerConfig()
        var repair = false
        var i = 0
        func value(_ name: String) throws(ServerError) -> String {
            i += 1
            guard i < arguments.count else { throw ServerError("\(name) needs a value") }
            return arguments[i]
        }
        func positive(_ name: String, _ text: String, upTo limit: Int) throws(ServerError) -> Int {
            guard let n = Int(text), n > 0, n <= limit else {
                throw ServerError("\(name) must be a whole number from 1 to \(limit), not \"\(text)\"")
            }
            return n
        }
        while i < arguments.count {
            let arg = arguments[i]
            // Accept both "--name value" and "--name=value".
            var name = arg
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            func v() throws(ServerError) -> String {
                if let inline { return inline }
                return try value(name)
            }
            switch name {
            case "-h", "--help": return .help
            case "--empty-catalog": config.seedSampleCatalog = false
            case "--repair": repair = true
            case "--customer-shards": config.customerShards = try positive(name, v(), upTo: 64)
            case "--log-segment-bytes": config.logSegmentBytes = try positive(name, v(), upTo: 1 << 40)
            case "--login-failures-per-account", "--login-failures-per-peer", "--registrations-per-peer":
                let text = try v()
                guard let n = Int(text), n >= 0, n <= 1_000_000 else {
                    throw ServerError("\(name) must be a whole number from 0 to 1000000, not \"\(text)\"")
                }
                switch name {
                case "--login-failures-per-account": config.loginFailuresPerAccount = n
                case "--login-failures-per-peer": config.loginFailuresPerPeer = n
                default: config.registrationsPerPeer = n
                }
            case "--session-open-rate", "--session-open-burst", "--max-sessions":
                let text = try v()
                let least = name == "--session-open-rate" ? 0 : 1
                guard let n = Int(text), n >= least, n <= 100_000_000 else {
                    throw ServerError("\(name) must be a whole number from \(least) to 100000000, not \"\(text)\"")
                }
                switch name {
                case "--session-open-rate": config.sessions.opensPerSecond = n
                case "--session-open-burst": config.sessions.openBurst = n
                default: config.sessions.maximumStored = n
                }
            case "--idempotency-lifetime", "--session-idle-lifetime":
                let text = try v()
                guard let seconds = duration(text) else {
                    throw ServerError("\(name) must be a duration such as 30s, 90m, 24h or 30d, not \"\(text)\"")
                }
                if name == "--idempotency-lifetime" { config.idempotencyLifetimeSeconds = seconds } else { config.sessionIdleLifetimeSeconds = seconds }
            case "--socket", "--data":
                let path = try v()
                guard !path.isEmpty else { throw ServerError("\(name) needs a non-empty path") }
                if name == "--socket" { config.socketPath = path } else { config.dataDirectory = path }
            case "--store":
                let text = try v()
                if text == "sqlite" {
                    config.postgres = nil
                } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") || text.contains("=") {
                    config.postgres = text
                } else {
                    throw ServerError("--store must be sqlite, a postgres:// URI or a libpq conninfo such as \"host=/run/postgresql dbname=groser\", not \"\(clip(text))\"")
                }
            case "--image-base-url":
                let url = try v()
                guard url.contains("://") else {
                    throw ServerError("--image-base-url must look like scheme://host:port, not \"\(url)\"")
                }
                config.imageBaseURL = url
            case "--max-frame-bytes": config.maximumFrameBytes = try positive(name, v(), upTo: 1 << 30)
            case "--threads": config.threads = try positive(name, v(), upTo: 256)
            case "--socket-group", "--admin-group":
                let text = try v()
                guard let gid = Accounts.groupID(text) else { throw ServerError("\(name): there is no group \"\(text)\"") }
                if name == "--socket-group" { config.socketGroup = gid } else { config.adminGroup = gid }
            case "--max-connections": config.maximumConnections = try positive(name, v(), upTo: 1_000_000)
            case "--max-connections-per-uid": config.maximumConnectionsPerUIDOption = try positive(name, v(), upTo: 1_000_000)
            case "--max-pending-output-bytes": config.maximumPendingOutputBytes = try positive(name, v(), upTo: 1 << 30)
            case "--slow-reader-timeout", "--idle-timeout", "--frame-read-timeout":
                let text = try v()
                guard let seconds = Double(text), seconds >= 0, seconds <= 86_400 * 365,
                      name == "--idle-timeout" || seconds > 0 else {
                    throw ServerError("\(name) must be a number of seconds\(name == "--idle-timeout" ? " (0: never)" : " above 0"), not \"\(text)\"")
                }
                switch name {
                case "--idle-timeout": config.idleTimeoutSeconds = seconds
                case "--frame-read-timeout": config.frameReadTimeoutSeconds = seconds
                default: config.slowReaderTimeoutSeconds = seconds
                }
            case "--max-unfinished-frame-bytes": config.maximumUnfinishedFrameBytes = try positive(name, v(), upTo: 1 << 40)
            case "--max-quantity": config.maximumQuantity = UInt32(try positive(name, v(), upTo: 2_000_000_000))
            case "--log-format":
                let text = try v()
                guard let format = LogFormat(rawValue: text) else {
                    throw ServerError("--log-format must be text or json, not \"\(text)\"")
                }
                config.logFormat = format
            case "--version":
                return .version
            case "--log-level":
                let text = try v()
                guard let level = LogLevel(name: text) else {
                    throw ServerError("--log-level must be debug, info, warning or error, not \"\(text)\"")
                }
                config.logLevel = level
            default:
                throw ServerError("unknown option \"\(arg)\" (see groserd --help)")
            }
            i += 1
        }
        return repair ? .repair(config) : .run(config)
    }

    /// Seconds in "30s", "90m", "24h", "30d" (a bare number is seconds), 1 s to 10 years.
    static func duration(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int64(digits), n > 0 else { return nil }
        let (seconds, overflow) = n.multipliedReportingOverflow(by: unit)
        guard !overflow, seconds <= 10 * 365 * 86_400 else { return nil }
        return seconds
    }
}
