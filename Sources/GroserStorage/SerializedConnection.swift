#if canImport(Glibc)
import Glibc
#endif

/// One SQLite connection used by one thread at a time. A plain pthread mutex
/// rather than `Mutex`: callers run generic, non-Sendable closures against the
/// connection, which `Mutex.withLock`'s `sending` rules cannot express.
final class SerializedConnection: @unchecked Sendable {
    // @unchecked: every use of `db` happens inside `withLock`.
    private let db: SQLiteConnection
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init(_ db: SQLiteConnection) {
        self.db = db
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: (SQLiteConnection) throws(StorageError) -> T) throws(StorageError) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(db)
    }
}
