#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// Readiness events of one descriptor.
public struct EpollEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let readable = EpollEvents(rawValue: EPOLLIN.rawValue)
    public static let writable = EpollEvents(rawValue: EPOLLOUT.rawValue)
    public static let error = EpollEvents(rawValue: EPOLLERR.rawValue)
    public static let hangup = EpollEvents(rawValue: EPOLLHUP.rawValue)
    public static let readHangup = EpollEvents(rawValue: EPOLLRDHUP.rawValue)
    public static let edgeTriggered = EpollEvents(rawValue: EPOLLET.rawValue)
    /// Wake only one of the epoll instances waiting on a shared descriptor.
    public static let exclusive = EpollEvents(rawValue: 1 << 28)
}

/// An epoll instance; owned by one event loop thread.
public final class Epoll {
    public let descriptor: Int32
    // Unchecked exclusivity: only the owning loop's thread calls `wait`,
    // and a checked access costs about 80 instructions per wake-up.
    @exclusivity(unchecked) private var events: [epoll_event]

    public init(maxEvents: Int = 256) throws(Errno) {
        descriptor = try syscall { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        events = [epoll_event](repeating: epoll_event(), count: maxEvents)
    }

    deinit { _ = Glibc.close(descriptor) }

    public func add(_ fd: Int32, events: EpollEvents, token: UInt64) throws(Errno) {
        var ev = epoll_event(events: events.rawValue, data: epoll_data_t(u64: token))
        _ = try syscall { epoll_ctl(descriptor, EPOLL_CTL_ADD, fd, &ev) }
    }

    public func modify(_ fd: Int32, events: EpollEvents, token: UInt64) throws(Errno) {
        var ev = epoll_event(events: events.rawValue, data: epoll_data_t(u64: token))
        _ = try syscall { epoll_ctl(descriptor, EPOLL_CTL_MOD, fd, &ev) }
    }

    public func remove(_ fd: Int32) {
        var ev = epoll_event()
        _ = epoll_ctl(descriptor, EPOLL_CTL_DEL, fd, &ev)
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) and calls `body` with
    /// each ready descriptor's token and events.
    public func wait(timeoutMilliseconds: Int32, _ body: (UInt64, EpollEvents) -> Void) throws(Errno) {
        let n = try events.withUnsafeMutableBufferPointer { (buf) throws(Errno) -> Int32 in
            try syscall { epoll_wait(descriptor, buf.baseAddress, Int32(buf.count), timeoutMilliseconds) }
        }
        for i in 0..<Int(n) {
            body(events[i].data.u64, EpollEvents(rawValue: events[i].events))
        }
    }
}

/// An eventfd used to wake an event loop from another thread.
public final class EventFD: @unchecked Sendable {
    // @unchecked: write and read on an eventfd are atomic syscalls.
    public let descriptor: Int32

    public init() throws(Errno) {
        descriptor = try syscall { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
    }

    deinit { _ = Glibc.close(descriptor) }

    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor, &one, 8)
    }

    public func drain() {
        var value: UInt64 = 0
        _ = Glibc.read(descriptor, &value, 8)
    }
}

/// Monotonic time in nanoseconds.
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Wall-clock time in seconds since the epoch.
public func wallClockSeconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}

/// The wall clock now, as `rfc3339Milliseconds` reads it.
public func wallClockNow() -> timespec {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return ts
}

/// `time` in UTC with milliseconds, as the log writes it:
/// 2026-12-02T16:45:23.123Z.
public func rfc3339Milliseconds(_ time: timespec) -> String {
    var t = time.tv_sec
    var tm = tm()
    gmtime_r(&t, &tm)
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let ms = Int(time.tv_nsec / 1_000_000)
    let milliseconds = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
    return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)).\(milliseconds)Z"
}
