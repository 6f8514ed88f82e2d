@_exported import GroserWire
import GroserSystem

/// Why a call failed: the server answered with a status, or the transport
/// failed before an answer arrived.
public enum GroserError: Error, Sendable, CustomStringConvertible {
    /// Nothing accepts connections at the socket path.
    case cannotConnect(path: String, reason: String)
    /// The default socket's directory is not safe to connect through:
    /// another user could have put their own socket there.
    case untrustedSocketDirectory(path: String, reason: String)
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
        case .cannotConnect(let path, let reason): "cannot connect to \(path): \(reason) (is groserd running?)"
        case .untrustedSocketDirectory(let path, let reason):
            "refusing to connect to \(path): \(reason), so another user could have put their own socket there; "
                + "remove the directory if it is not yours, or name a socket you trust (--socket or GROSER_SOCKET)"
        case .transport(let what): "connection failed: \(what)"
        case .timedOut(let seconds): "no answer within \(Self.format(seconds)) s"
        case .server(let status): "\(status.code): \(status.message)"
        case .cancelled: "cancelled before the answer came"
        }
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
