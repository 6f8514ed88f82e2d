import GroserSystem

/// Everything `groserd` can be told on its command line.
public struct ServerConfig: Sendable {
    /// The socket, and whether it was named or is the per-user default
    /// (whose directory groserd creates and insists on owning).
    public var socket: SocketLocation
    /// The socket file's path; setting it names the socket explicitly.
    public var socketPath: String {
        get { socket.path }
        set { socket = SocketLocation(path: newValue, isExplicit: true) }
    }
    public var dataDirectory: String
    /// scheme://host:port put in front of relative product image URLs.
    public var imageBaseURL: String
    public var maximumFrameBytes: Int
    /// Event loop threads; one per core by default.
    public var threads: Int
    public var logLevel: LogLevel
    public var logFormat = LogFormat.text
    /// Unsent response bytes above which a connection is no longer read
    /// until its client catches up (backpressure).
    public var maximumPendingOutputBytes: Int
    /// Connections open at once; the next one gets UNAVAILABLE and is closed.
    public var maximumConnections = 4096
    /// Connections one peer uid may hold at once (operators excepted); nil:
    /// a quarter of `maximumConnections`.
    public var maximumConnectionsPerUIDOption: Int?
    /// A quarter by default: a web front end running as one user gets
    /// plenty, and a few users together still cannot fill every slot.
    public var maximumConnectionsPerUID: Int { maximumConnectionsPerUIDOption ?? max(1, maximumConnections / 4) }
    /// A client whose answers have waited this long without it reading any
    /// is cut off.
    public var slowReaderTimeoutSeconds = 10.0
    /// Connections with nothing to do and no watch for this long are
    /// closed; 0: never.
    public var idleTimeoutSeconds = 300.0
    /// A frame whose bytes have not all arrived this long after it began
    /// closes its connection (a client sending part of a frame and stopping).
    public var frameReadTimeoutSeconds = 5.0
    /// Bytes all connections together may hold in frames still arriving;
    /// above it, the connections holding the largest are closed first.
    public var maximumUnfinishedFrameBytes = 64 * 1024 * 1024
    /// The most units of one product in a cart line.
    public var maximumQuantity: UInt32 = 99
    /// The socket file's group (it is 0660), when not the daemon's own.
    public var socketGroup: UInt32?
    /// Members of this group may call the admin methods, besides the
    /// daemon's own user and root.
    public var adminGroup: UInt32?
    /// A new data directory starts with the built-in sample catalog, unless
    /// this is false (an operator who imports a chain's own catalog).
    public var seedSampleCatalog = true
    /// The PostgreSQL database (libpq URI or conninfo) that holds the
    /// catalog, carts and orders, shared with other groserd; nil: SQLite
    /// and the customer log in the data directory.
    public var postgres: String?
    /// Shards of customer state (a new data directory only).
    public var customerShards = 2
    /// Customer log segment size that triggers a checkpoint.
    public var logSegmentBytes = 64 << 20
    public var idempotencyLifetimeSeconds: Int64 = 24 * 3600
    public var sessionIdleLifetimeSeconds: Int64 = 30 * 86_400
    /// OpenSession per peer uid, and the most sessions stored (--session-open-rate, --max-sessions).
    public var sessions = SessionLimits()
    /// Failed logins before the waits start, per account and per peer uid (0: no limit).
    public var loginFailuresPerAccount = 5
    public var loginFailuresPerPeer = 50
    /// Registrations per peer uid per minute (0: no limit).
    public var registrationsPerPeer = 20
    /// The listening socket systemd passed (socket activation): used
    /// instead of binding `socket`, and neither created nor removed.
    public var activatedListener: Systemd.PassedSocket?
    /// Where the customer log lives.
    public var customerDirectory: String { dataDirectory + "/customers" }

    /// - Parameter socketPath: nil for `$GROSER_SOCKET` or the per-user default.
    public init(socketPath: String? = nil,
                dataDirectory: String = ServerConfig.defaultDataDirectory(),
                imageBaseURL: String = "http://localhost:8080",
                maximumFrameBytes: Int = 4 * 1024 * 1024,
                threads: Int = max(1, ProcessInfo.processorCount),
                logLevel: LogLevel = .info,
                maximumPendingOutputBytes: Int = 1024 * 1024) {
        socket = socketPath.map { SocketLocation(path: $0, isExplicit: true) } ?? .fromEnvironment()
        self.dataDirectory = dataDirectory
        self.imageBaseURL = imageBaseURL
        self.maximumFrameBytes = maximumFrameBytes
        self.threads = threads
        self.logLevel = logLevel
        self.maximumPendingOutputBytes = maximumPendingOutputBytes
    }

    /// `$GROSER_SOCKET`, else `$XDG_RUNTIME_DIR/groser/groserd.sock`, else
    /// `/tmp/groser-<uid>/groserd.sock`. Shared by the daemon and its clients.
    public static func defaultSocketPath() -> String { SocketLocation.fromEnvironment().path }

    /// `$XDG_DATA_HOME/groser`, else `~/.local/share/groser`.
    public static func defaultDataDirectory() -> String {
        if let data = ProcessInfo.environment("XDG_DATA_HOME") { return data + "/groser" }
        return ProcessInfo.homeDirectory + "/.local/share/groser"
    }
}
