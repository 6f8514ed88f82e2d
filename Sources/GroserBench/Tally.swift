import GroserSystem
import GroserWire
/// What one load generator thread counted; merged across threads at the end.
public struct BenchTally: Sendable, Equatable {
    /// Latency of every successful request, send to answer, in nanoseconds.
    public var histogram = LatencyHistogram()
    /// Answered OK, with the right id and the method's body.
    public var succeeded: UInt64 = 0
    /// Answered with a status other than OK, by status code.
    public var failedByCode: [Int32: UInt64] = [:]
    /// Answered with an id other than the one expected next.
    public var idMismatches: UInt64 = 0
    /// Answered OK but with another method's body (or none).
    public var wrongBodies: UInt64 = 0
    /// Frames that were not a readable Response.
    public var malformed: UInt64 = 0
    /// Connections that failed (reset, closed by the server, stalled).
    public var connectionFailures: UInt64 = 0
    /// Requests sent on a failed connection and never answered.
    public var unanswered: UInt64 = 0
    /// Bytes of every answer, frame header included.
    public var responseBytes: UInt64 = 0
    /// Bytes of the body (the method's embedded message) of every OK answer.
    public var bodyBytes: UInt64 = 0

    public init() {}

    /// Every request answered with anything.
    public var answered: UInt64 { succeeded + failedResponses }

    /// Answered requests that did not succeed.
    public var failedResponses: UInt64 {
        failedByCode.values.reduce(0, +) + idMismatches + wrongBodies + malformed
    }

    /// Every request that did not succeed, answered or not.
    public var failed: UInt64 { failedResponses + unanswered }

    /// True when anything went wrong, including a connection failing between requests.
    public var hasErrors: Bool { failed > 0 || connectionFailures > 0 }

    public mutating func merge(_ other: BenchTally) {
        histogram.merge(other.histogram)
        succeeded += other.succeeded
        failedByCode.merge(other.failedByCode, uniquingKeysWith: +)
        idMismatches += other.idMismatches
        wrongBodies += other.wrongBodies
        malformed += other.malformed
        connectionFailures += other.connectionFailures
        unanswered += other.unanswered
        responseBytes += other.responseBytes
        bodyBytes += other.bodyBytes
    }

    /// Counts one answer.
    mutating func count(_ envelope: ResponseEnvelope?, expectedID: UInt64, expectedField: UInt32,
                        frameBytes: Int, latency: UInt64) {
        responseBytes += UInt64(frameBytes)
        guard let envelope else { malformed += 1; return }
        guard envelope.id == expectedID else { idMismatches += 1; return }
        guard envelope.statusCode == 0 else { failedByCode[envelope.statusCode, default: 0] += 1; return }
        guard envelope.bodyField == expectedField else { wrongBodies += 1; return }
        succeeded += 1
        bodyBytes += UInt64(envelope.bodyBytes)
        histogram.record(latency)
    }
}
