#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// A multi-producer queue one consumer thread drains in batches (pthread
/// mutex and condition variable; no Dispatch in the request path).
///
/// `put` and `take` are inlinable, so the modules that use the queue get
/// them specialized for their element: called across the module boundary
/// unspecialized, a put cost about 830 instructions under callgrind (the
/// array's type metadata looked up, a generic append, two exclusivity
/// checks) for each cart request on its way to a shard.
public final class BlockingQueue<Element: Sendable>: @unchecked Sendable {
    // @unchecked: `items` and `closed` are only touched with `mutex` held;
    // for the same reason their exclusivity is not checked at run time.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @usableFromInline let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Queued elements are `items[head...]`; taking moves `head` rather than
    /// shifting the array, which made a long queue quadratic to drain.
    @usableFromInline @exclusivity(unchecked) var items: [Element] = []
    @usableFromInline @exclusivity(unchecked) var head = 0
    @usableFromInline @exclusivity(unchecked) var closed = false
    /// While the consumer waits in `wait(forAtLeast:)`: the count it waits
    /// for. A put below it does not wake the consumer (0: wake on any put).
    @usableFromInline @exclusivity(unchecked) var gatherTarget = 0
    /// An empty array with room, given back by `recycle`: the next `take`
    /// swaps it in for the queue instead of allocating a new one. (A fresh
    /// array of jobs per batch showed as page faults under perf: each new
    /// buffer's pages were touched for the first time by the appends.)
    @usableFromInline @exclusivity(unchecked) var spare: [Element] = []

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Adds an element (moved in, not copied); false when the queue is closed.
    @discardableResult @inlinable
    public func put(_ element: consuming Element) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !closed else { return false }
        items.append(element)
        // Not for each request of a gather: waking the shard's thread 25
        // times to go back to sleep 24 times cost a context switch each
        // (perf at c=50 P=1: finish_task_switch led groserd's profile).
        if gatherTarget == 0 || items.count - head >= gatherTarget { pthread_cond_signal(condition) }
        return true
    }

    /// Waits until something is queued, then takes up to `limit` elements in
    /// order. Returns an empty array once the queue is closed and drained.
    @inlinable
    public func take(upTo limit: Int) -> [Element] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while head == items.count && !closed { pthread_cond_wait(condition, mutex) }
        return takeLocked(limit)
    }

    /// Like `take(upTo:)`, but waits at most `timeoutNanoseconds`: then an
    /// empty array also when the queue is open (`isClosed` tells which).
    @inlinable
    public func take(upTo limit: Int, timeoutNanoseconds: UInt64) -> [Element] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if head == items.count && !closed {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let total = UInt64(now.tv_nsec) + timeoutNanoseconds
            var until = timespec(tv_sec: now.tv_sec + Int(total / 1_000_000_000), tv_nsec: Int(total % 1_000_000_000))
            while head == items.count && !closed {
                if pthread_cond_timedwait(condition, mutex, &until) == ETIMEDOUT { break }
            }
        }
        return takeLocked(limit)
    }

    /// Waits until at least `count` elements are queued, the queue is
    /// closed, or `timeoutNanoseconds` passed; takes nothing. Puts wake the
    /// waiter only once `count` is reached: for a queue with one consumer.
    public func wait(forAtLeast count: Int, timeoutNanoseconds: UInt64) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard items.count - head < count && !closed else { return }
        gatherTarget = count
        defer { gatherTarget = 0 }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = UInt64(now.tv_nsec) + timeoutNanoseconds
        var until = timespec(tv_sec: now.tv_sec + Int(total / 1_000_000_000), tv_nsec: Int(total % 1_000_000_000))
        while items.count - head < count && !closed {
            if pthread_cond_timedwait(condition, mutex, &until) == ETIMEDOUT { break }
        }
    }

    /// True once `close` was called.
    public var isClosed: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return closed
    }

    @usableFromInline
    func takeLocked(_ limit: Int) -> [Element] {
        if head == 0 && items.count <= limit {
            // All of it: the array itself is handed over, its elements
            // moved rather than copied and destroyed (the shards' jobs).
            var batch: [Element] = []
            swap(&batch, &spare)
            if batch.capacity == 0 { batch.reserveCapacity(min(items.capacity, 4096)) }
            swap(&batch, &items)
            return batch
        }
        let end = min(head + limit, items.count)
        let batch = Array(items[head..<end])
        head = end
        if head == items.count {
            items.removeAll(keepingCapacity: items.capacity <= 4096)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            // Mostly taken: drop the taken front, once per halving.
            items.removeFirst(head)
            head = 0
        }
        return batch
    }

    /// Gives a taken batch's array back once its elements are done with:
    /// emptied here, its room is used by the next `take`. At most 4,096
    /// elements' room is kept.
    @inlinable
    public func recycle(_ batch: consuming [Element]) {
        var batch = batch
        guard batch.capacity <= 4096 else { return }
        batch.removeAll(keepingCapacity: true)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if spare.capacity < batch.capacity { swap(&spare, &batch) }
    }

    /// No more puts; `take` returns what is left, then empty arrays.
    public func close() {
        pthread_mutex_lock(mutex)
        closed = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}

/// Random bytes from the kernel (getrandom), for session tokens.
public enum KernelRandom {
    public static func bytes(_ count: Int) throws(Errno) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = try syscall { out.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, count - filled, 0) } }
            filled += n
        }
        return out
    }

    /// `count` random bytes as lower-case hex.
    public static func hex(_ count: Int) throws(Errno) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var s: [UInt8] = []
        for b in try bytes(count) {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0xf)])
        }
        return String(decoding: s, as: UTF8.self)
    }
}

/// The local calendar year and month (1...12) now, by the host's clock.
public func localYearMonth() -> (year: Int, month: Int) {
    var t = time(nil)
    var tm = tm()
    localtime_r(&t, &tm)
    return (Int(tm.tm_year) + 1900, Int(tm.tm_mon) + 1)
}
