#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// A joinable OS thread running one closure (no Foundation).
public final class OSThread: @unchecked Sendable {
    // @unchecked: `handle` is written once before start returns, read by join.
    private var handle = pthread_t()
    private var joined = false

    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts a thread named `name` (at most 15 bytes show) running `body`.
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let rc = pthread_create(&handle, nil, { arg in
            let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            throw Errno(rawValue: rc)
        }
        _ = pthread_setname_np(handle, String(name.prefix(15)))
    }

    /// Lowers the calling thread's priority (nice +`nice`): background work
    /// (compaction, search indexing, imports) then waits while the loops
    /// and shards serve requests, and takes the CPU when they are idle.
    public static func runInBackground(nice: Int32 = 10) {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(groser_gettid()), nice)
    }

    /// Suspends the calling thread for `milliseconds`.
    public static func sleep(milliseconds: Int) {
        var request = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        var left = timespec()
        while nanosleep(&request, &left) == -1 && errno == EINTR { request = left }
    }

    /// Lets the thread's resources go when it ends, unjoined. Call once,
    /// instead of `join`.
    public func detach() {
        precondition(!joined, "thread joined or detached twice")
        joined = true
        pthread_detach(handle)
    }

    /// Waits for the thread to finish. Call once.
    public func join() {
        precondition(!joined, "thread joined twice")
        joined = true
        pthread_join(handle, nil)
    }
}
