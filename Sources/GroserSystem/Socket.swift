#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// The result of a non-blocking read or write.
public enum IOResult: Equatable, Sendable {
    /// This many bytes moved (0 from a read means the peer closed).
    case processed(Int)
    /// The call would block: wait for readiness.
    case wouldBlock
}

/// The credentials of the process at the other end of a Unix socket.
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

/// A Unix stream socket with exactly one owner. `close()` must be called
/// once; closing twice is a programming error, and a socket dropped while
/// open is closed by `deinit` (and asserts in debug builds).
public final class Socket: @unchecked Sendable {
    // @unchecked: the descriptor is owned by one thread at a time (the event
    // loop that accepted it, or the client connection behind its lock).
    // Unchecked exclusivity: the socket has one owner at a time, and a
    // checked access costs about 80 instructions, several per request.
    @exclusivity(unchecked) public private(set) var descriptor: Int32

    public init(takingOwnershipOf fd: Int32) { self.descriptor = fd }

    deinit {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }

    public var isOpen: Bool { descriptor >= 0 }

    /// Closes the descriptor. Never retried: after EINTR the fd is gone.
    public func close() {
        precondition(descriptor >= 0, "socket closed twice")
        _ = Glibc.close(descriptor)
        descriptor = -1
    }

    /// A new, unconnected Unix stream socket (close-on-exec).
    public static func unixStream(nonBlocking: Bool) throws(Errno) -> Socket {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        let fd = try syscall { Glibc.socket(AF_UNIX, type, 0) }
        return Socket(takingOwnershipOf: fd)
    }

    public func setNonBlocking(_ on: Bool) throws(Errno) {
        let flags = try syscall { fcntl(descriptor, F_GETFL) }
        let new = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        _ = try syscall { fcntl(descriptor, F_SETFL, new) }
    }

    /// Binds to `path` with the given file mode: the umask is set before
    /// bind (not chmod after), so the socket never exists with wider rights.
    /// A path starting with "@" names an abstract socket (Linux): no file,
    /// no mode; the name is the rest of the path.
    public func bind(path: String, mode: mode_t) throws(Errno) {
        var (addr, length) = try Socket.address(path)
        let old = umask(~mode & 0o777)
        defer { umask(old) }
        _ = try withUnsafePointer(to: &addr) { (p) throws(Errno) -> Int32 in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(Errno) -> Int32 in
                try syscall { Glibc.bind(descriptor, sa, length) }
            }
        }
    }

    /// True for "@name": an abstract socket address, not a file.
    public static func isAbstract(_ path: String) -> Bool { path.hasPrefix("@") }

    public func listen(backlog: Int32) throws(Errno) {
        _ = try syscall { Glibc.listen(descriptor, backlog) }
    }

    /// Connects to the socket at `path` (blocking unless the socket is not).
    public func connect(path: String) throws(Errno) {
        var (addr, length) = try Socket.address(path)
        _ = try withUnsafePointer(to: &addr) { (p) throws(Errno) -> Int32 in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(Errno) -> Int32 in
                try syscall { Glibc.connect(descriptor, sa, length) }
            }
        }
    }

    /// Accepts one connection as a non-blocking socket, or nil when none is waiting.
    public func accept() throws(Errno) -> Socket? {
        let flags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        do {
            let fd = try syscall { accept4(descriptor, nil, nil, flags) }
            return Socket(takingOwnershipOf: fd)
        } catch .wouldBlock {
            return nil
        }
    }

    /// Reads into `buffer`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> IOResult {
        do {
            return .processed(try syscall { Glibc.read(descriptor, buffer.baseAddress, buffer.count) })
        } catch .wouldBlock {
            return .wouldBlock
        }
    }

    /// Sends `buffer` without raising SIGPIPE.
    public func write(_ buffer: UnsafeRawBufferPointer) throws(Errno) -> IOResult {
        do {
            return .processed(try syscall { send(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) })
        } catch .wouldBlock {
            return .wouldBlock
        }
    }

    /// Sends `first` then `second` in one call (`sendmsg` of the two), without raising SIGPIPE.
    public func write(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) throws(Errno) -> IOResult {
        guard !first.isEmpty else { return try write(second) }
        guard !second.isEmpty else { return try write(first) }
        var parts = (iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
                     iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count))
        do {
            return .processed(try withUnsafeMutablePointer(to: &parts) { (p) throws(Errno) -> Int in
                var message = msghdr()
                message.msg_iov = UnsafeMutableRawPointer(p).assumingMemoryBound(to: iovec.self)
                message.msg_iovlen = 2
                return try syscall { sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL)) }
            })
        } catch .wouldBlock {
            return .wouldBlock
        }
    }

    /// Writes all of `bytes`, blocking; for blocking sockets only.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            switch try write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .processed(let n): offset += n
            case .wouldBlock: throw .wouldBlock
            }
        }
    }

    /// The connected peer's pid, uid and gid (SO_PEERCRED).
    public func peerCredentials() throws(Errno) -> PeerCredentials {
        var cred = groser_ucred()
        _ = try syscall { groser_peercred(descriptor, &cred) }
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid)
    }

    /// Waits until the socket is readable (or writable), up to `timeoutMilliseconds`
    /// (-1: forever). Returns false on timeout.
    public func poll(forWriting: Bool = false, timeoutMilliseconds: Int32) throws(Errno) -> Bool {
        var p = pollfd(fd: descriptor, events: Int16(forWriting ? POLLOUT : POLLIN), revents: 0)
        let n = try syscall { Glibc.poll(&p, 1, timeoutMilliseconds) }
        return n > 0
    }

    /// Shuts down both directions, waking any thread blocked on the socket.
    public func shutdown() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// The address of `path`, and its length: the whole structure for a
    /// file, and for an abstract name ("@name": a NUL, then the name) only
    /// up to the name's end, as socat, ss and systemd write it.
    static func address(_ path: String) throws(Errno) -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let abstract = isAbstract(path)
        let bytes = abstract ? [0] + Array(path.utf8.dropFirst()) : Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count > (abstract ? 1 : 0), bytes.count < capacity else { throw .nameTooLong }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        return (addr, abstract ? socklen_t(pathOffset + bytes.count) : socklen_t(MemoryLayout<sockaddr_un>.size))
    }
}
