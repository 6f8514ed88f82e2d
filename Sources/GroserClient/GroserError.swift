@_exported import GroserWire
import GroserSystem

/// Why a call failed: the server answered with a status, or the transport
/// failed before an answer arrived.
public enum GroserError: Error, Sendable, CustomStringConvertible {
    /// connect(2) to the socket path failed: nothing listens there
    /// (ENOENT, ECONNREFUSED), or this user may not use it (EACCES).
    case cannotConnect(path: String, errno: Errno)
    /// The default socket's directory is not safe to connect through:
    /// another user could have put their own socket there.
    case untrustedSocketDirectory(path: String, reason: String)
    /// The per-user default socket's directory does not exist: no groserd
    /// made it, so none listens there (nothing was connected to).
    case notRunning(directory: String)
    /// The server at `path` runs as `uid`, none of `expected` (this user,
    /// root, and the uid named with --expect-server-uid or
    /// GROSER_SERVER_UID): another user's socket, refused before a byte was sent.
    case untrustedServer(path: String, uid: UInt32, expected: [UInt32])
    /// The connection broke, or a frame could not be read.
    case transport(String)
    /// No answer within the call's timeout.
    case timedOut(seconds: Double)
    /// The server answered with a non-OK status.
    case server(Status)
    /// The calling task was cancelled before the answer came (the request
    /// may still have been applied: resend a mutation with its idempotency key).
    case cancelled

    /// The server's status, when the server answered.
    public var status: Status? {
        if case .server(let s) = self { return s }
        return nil
    }

    public var description: String {
        switch self {
        case .cannotConnect(let path, let errno) where errno == .permissionDenied:
            // groserd may well be running: the socket's mode or group keeps this user out.
            "cannot connect to \(path): \(errno): this user may not use that socket "
                + "(groserd's --socket-group names the group that may)"
        case .cannotConnect(let path, let errno) where errno == .nameTooLong:
            "cannot connect to \(path): \(errno): a socket path holds at most 107 bytes, this one \(path.utf8.count)"
        case .cannotConnect(let path, let errno): "cannot connect to \(path): \(errno) (is groserd running?)"
        case .untrustedSocketDirectory(let path, let reason):
            "refusing to connect to \(path): \(reason), so another user could have put their own socket there; "
                + "remove the directory if it is not yours, or name a socket you trust (--socket or GROSER_SOCKET)"
        case .notRunning(let directory):
            "groserd is not running: \(directory) does not exist (start groserd, or name its socket with --socket or GROSER_SOCKET)"
        case .untrustedServer(let path, let uid, let expected):
            "refusing to talk to \(path): the server there runs as \(Accounts.describe(uid: uid)), not as "
                + Self.names(expected) + ", so it may be another user's impostor; if groserd really runs as that user, "
                + "name it with --expect-server-uid \(uid) or GROSER_SERVER_UID=\(uid)"
        case .transport(let what): "connection failed: \(what)"
        case .timedOut(let seconds): "no answer within \(Self.format(seconds)) s"
        case .server(let status): "\(status.code): \(status.message)"
        case .cancelled: "cancelled before the answer came"
        }
    }

    /// "uid 1000 (this user) or root", "uid 1000 (this user), root or uid 998 (groser)".
    private static func names(_ uids: [UInt32]) -> String {
        let words = uids.map { uid in
            uid == 0 ? "root" : uid == ProcessInfo.userID ? "uid \(uid) (this user)" : Accounts.describe(uid: uid)
        }
        guard words.count > 1 else { return words.first ?? "" }
        return words.dropLast().joined(separator: ", ") + " or " + words.last!
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

/// One blocking call or stream as the client saw it, for `-v` output:
/// where it went, its request id, the deadline sent and how it ended.
public struct CallTrace: Sendable {
    public var socketPath: String
    public var requestID: UInt64
    /// The deadline sent with the request, in milliseconds; 0 is none (a stream).
    public var deadlineMilliseconds: UInt32
    /// From sending the request to its answer (or failure); nil for a
    /// stream, reported when it opens.
    public var elapsedNanoseconds: UInt64?
    /// The answer's status, or why there was none.
    public var outcome: Result<Status, GroserError>
}
