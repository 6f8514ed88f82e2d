#if canImport(Glibc)
import Glibc
#endif

/// A POSIX error number with Swift-style names, thrown by every syscall
/// wrapper in this module.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current errno.
    public static var current: Errno { Errno(rawValue: errno) }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let inProgress = Errno(rawValue: EINPROGRESS)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    public static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let notConnected = Errno(rawValue: ENOTCONN)

    public var description: String {
        guard let s = strerror(rawValue) else { return "errno \(rawValue)" }
        return String(cString: s)
    }
}

/// Runs a syscall that returns -1 and sets errno on failure, retrying EINTR.
/// Every wrapper in this module goes through here (except `close`, which is
/// never retried: on Linux the descriptor is gone even when it fails).
@inlinable
public func syscall<T: FixedWidthInteger>(_ body: () -> T) throws(Errno) -> T {
    while true {
        let r = body()
        if r != -1 { return r }
        let e = errno
        if e == EINTR { continue }
        throw Errno(rawValue: e)
    }
}
