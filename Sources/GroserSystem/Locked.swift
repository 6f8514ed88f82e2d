#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex. Used instead of Synchronization's
/// `Mutex`, whose Linux implementation waits on raw futexes that
/// ThreadSanitizer cannot see (it reports every guarded access as a race),
/// and whose `sending` rules reject generic non-Sendable closures.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched with `mutex` held. Unchecked
    // exclusivity for the same reason (the mutex already excludes a second
    // access, and a nested withLock would deadlock before it got there);
    // inlinable so callers get withLock specialized for their closure
    // (the Stats counters of every request went through the generic one,
    // with a run-time exclusivity check, about 250 instructions).
    @usableFromInline @exclusivity(unchecked) var value: Value
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// For `withLock(when:_:)`.
    let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    @inlinable
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits until `ready` holds for the value (the lock released while it
    /// waits), then runs `body` holding the lock. Whoever changes the value
    /// so that `ready` may hold calls `wakeWaiters()` afterwards.
    public func withLock<R>(when ready: (Value) -> Bool, _ body: (inout Value) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) { pthread_cond_wait(condition, mutex) }
        return body(&value)
    }

    /// Wakes every thread waiting in `withLock(when:_:)` to check again.
    public func wakeWaiters() {
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}
