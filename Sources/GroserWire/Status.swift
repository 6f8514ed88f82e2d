/// A status code on the wire, numbered as gRPC's. A small struct over a
/// private enum, so codes this build does not know still round-trip.
public struct StatusCode: Hashable, Sendable, CustomStringConvertible {
    private enum Known: Int32, CaseIterable {
        case ok = 0, cancelled, unknown, invalidArgument, deadlineExceeded, notFound,
             alreadyExists, permissionDenied, resourceExhausted, failedPrecondition,
             aborted, outOfRange, unimplemented, `internal`, unavailable, dataLoss,
             unauthenticated
    }

    /// The number on the wire.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
    private init(_ known: Known) { self.rawValue = known.rawValue }

    public static let ok = StatusCode(.ok)
    public static let cancelled = StatusCode(.cancelled)
    public static let unknown = StatusCode(.unknown)
    public static let invalidArgument = StatusCode(.invalidArgument)
    public static let deadlineExceeded = StatusCode(.deadlineExceeded)
    public static let notFound = StatusCode(.notFound)
    public static let alreadyExists = StatusCode(.alreadyExists)
    public static let permissionDenied = StatusCode(.permissionDenied)
    public static let resourceExhausted = StatusCode(.resourceExhausted)
    public static let failedPrecondition = StatusCode(.failedPrecondition)
    public static let aborted = StatusCode(.aborted)
    public static let outOfRange = StatusCode(.outOfRange)
    public static let unimplemented = StatusCode(.unimplemented)
    public static let `internal` = StatusCode(.internal)
    public static let unavailable = StatusCode(.unavailable)
    public static let dataLoss = StatusCode(.dataLoss)
    public static let unauthenticated = StatusCode(.unauthenticated)

    /// The gRPC name: "NOT_FOUND", or "CODE_42" for a number this build does not know.
    public var description: String {
        guard let known = Known(rawValue: rawValue) else { return "CODE_\(rawValue)" }
        var name = ""
        for ch in "\(known)" {
            if ch.isUppercase { name += "_" }
            name += ch.uppercased()
        }
        return name
    }
}

/// The outcome of one request as the wire carries it: a code and one
/// readable sentence. Local runtime failures are `GroserError`, not this.
public struct Status: Hashable, Sendable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String

    public init(_ code: StatusCode, _ message: String = "") {
        self.code = code
        self.message = message
    }

    public static let ok = Status(.ok)

    public var isOK: Bool { code == .ok }

    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }
}
