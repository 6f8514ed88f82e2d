#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// What systemd (or `systemd-socket-activate`) hands a service, read the
/// way sd_listen_fds(3) and sd_notify(3) describe, without libsystemd.
public enum Systemd {
    /// A listening socket passed with `LISTEN_FDS` (from descriptor 3 on).
    public struct PassedSocket: Sendable {
        public var descriptor: Int32
        /// Its `LISTEN_FDNAMES` entry ("unknown" when none was given).
        public var name: String
    }

    /// The sockets passed to this process, when `LISTEN_PID` names it; nil
    /// when none were (not socket-activated). The variables are unset so a
    /// child does not take them for its own, and the descriptors get
    /// close-on-exec.
    public static func passedSockets() -> [PassedSocket]? {
        guard let pid = ProcessInfo.environment("LISTEN_PID"), let count = ProcessInfo.environment("LISTEN_FDS") else { return nil }
        let names = ProcessInfo.environment("LISTEN_FDNAMES")?.split(separator: ":", omittingEmptySubsequences: false).map(String.init) ?? []
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard Int32(pid) == getpid(), let n = Int32(count), n > 0, n < 1024 else { return nil }
        return (0..<n).map { i in
            let fd = 3 + i
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return PassedSocket(descriptor: fd, name: Int(i) < names.count ? names[Int(i)] : "unknown")
        }
    }

    /// Why a passed descriptor cannot be groserd's listener, or nil when it
    /// is a listening Unix stream socket.
    public static func problem(withListener fd: Int32) -> String? {
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else { return "descriptor \(fd) is not a socket" }
        guard type == Int32(SOCK_STREAM.rawValue) else { return "descriptor \(fd) is not a stream socket" }
        var accepting: Int32 = 0
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting != 0 else {
            return "descriptor \(fd) is not listening"
        }
        var address = sockaddr_storage()
        length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok, address.ss_family == sa_family_t(AF_UNIX) else { return "descriptor \(fd) is not a Unix socket" }
        return nil
    }

    /// Sends sd_notify states ("READY=1", "STOPPING=1", "WATCHDOG=1",
    /// "STATUS=…") to `NOTIFY_SOCKET`, when set: a datagram socket's path,
    /// or "@name" for an abstract one.
    public final class Notifier: Sendable {
        private let path: String?
        /// From `WATCHDOG_USEC` (when `WATCHDOG_PID` is unset or this
        /// process): how often systemd wants WATCHDOG=1, in microseconds.
        public let watchdogMicroseconds: UInt64?

        public init() {
            path = ProcessInfo.environment("NOTIFY_SOCKET")
            let pidOK = ProcessInfo.environment("WATCHDOG_PID").map { Int32($0) == getpid() } ?? true
            watchdogMicroseconds = pidOK ? ProcessInfo.environment("WATCHDOG_USEC").flatMap { UInt64($0) }.flatMap { $0 > 0 ? $0 : nil } : nil
            unsetenv("NOTIFY_SOCKET")
        }

        public var isEnabled: Bool { path != nil }

        /// Sends `state` (lines of KEY=VALUE). Returns false when there is
        /// no notify socket or the datagram could not be sent.
        @discardableResult
        public func notify(_ state: String) -> Bool {
            guard let path else { return false }
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { _ = close(fd) }
            guard let target = try? Socket.address(path) else { return false }
            var address = target.0
            let length = target.1
            let bytes = Array(state.utf8)
            let sent = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
                }
            }
            return sent == bytes.count
        }
    }
}
