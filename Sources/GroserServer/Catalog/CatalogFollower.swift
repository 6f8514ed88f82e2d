import GroserStorage
import GroserSystem

/// Keeps this host's catalog in step with the changes other groserd commit
/// to the PostgreSQL database they share. A notification on
/// `PostgresCatalogStore.notificationChannel` is only a hint that something
/// changed: the catalog version in the database is the truth, read on every
/// notification, every `pollMilliseconds` without one (a notification is
/// lost with its connection), and after every reconnect. A refresh
/// re-encodes only the shelves changed since this host's version, and tells
/// the watchers and the search index as a local change does.
final class CatalogFollower: Sendable {
    private let conninfo: String
    private let catalog: CatalogService
    private let logger: Logger
    /// Told of the listening connection's failures and reconnects (the
    /// version reads are the catalog store's, which tells it of its own).
    private let health: StoreHealth
    private let stopped = Locked(false)
    private let thread = Locked<OSThread?>(nil)
    /// The longest a change can go unseen when its notification is lost.
    static let pollMilliseconds = 1000
    /// Waits between reconnection attempts: doubling from the first to the last.
    static let backoff = (first: 100, last: 5000)

    init(conninfo: String, catalog: CatalogService, logger: Logger, health: StoreHealth) {
        self.conninfo = conninfo
        self.health = health
        self.catalog = catalog
        self.logger = logger
    }

    func start() throws(Errno) {
        let t = try OSThread(name: "groserd-follow") { [self] in run() }
        thread.withLock { $0 = t }
    }

    func stop() {
        stopped.withLock { $0 = true }
        thread.withLock { t in defer { t = nil }; return t }?.join()
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func run() {
        var wait = Self.backoff.first
        var lost = false
        while !isStopped {
            do {
                let connection = try PostgresConnection(PostgresCatalogStore.withConnectionDefaults(conninfo))
                defer { connection.close() }
                try connection.listen(PostgresCatalogStore.notificationChannel)
                health.succeeded()
                if lost {
                    health.reconnected()
                    logger.info("PostgreSQL is reachable again: following catalog changes")
                }
                lost = false
                wait = Self.backoff.first
                // What changed while nobody listened.
                try refresh()
                while !isStopped {
                    // A notification or a quiet second: either way the
                    // version decides (a refresh at the current version
                    // reads one row).
                    _ = try connection.notifications(timeoutMilliseconds: Self.pollMilliseconds)
                    if isStopped { return }
                    try refresh()
                }
            } catch {
                // The catalog store tells of its own failures (refresh).
                if let e = error as? PostgresError, e.isConnectionFailure { health.failed(e.message) }
                if !lost { logger.warning("cannot follow catalog changes in PostgreSQL (\(error)); retrying with backoff") }
                lost = true
                var slept = 0
                while slept < wait, !isStopped {
                    OSThread.sleep(milliseconds: min(100, wait - slept))
                    slept += 100
                }
                wait = min(wait * 2, Self.backoff.last)
            }
        }
    }

    private func refresh() throws(StorageError) {
        if try catalog.refresh() {
            logger.debug("catalog brought to version \(catalog.current.version) from PostgreSQL")
        }
    }
}
