import GroserSystem
import GroserWire

/// Whether this binary was built without optimisation.
public enum BuildMode {
    #if DEBUG
    public static let isDebug = true
    #else
    public static let isDebug = false
    #endif

    public static let debugWarning = """
    WARNING: groser-bench was built in DEBUG mode; its numbers measure the \
    load generator, not groserd. Build with `swift build -c release`.
    """
}

/// The summary of a run: as text, as one JSON object, and the last line.
public struct BenchReport {
    public var result: BenchResult

    public init(_ result: BenchResult) { self.result = result }

    private var tally: BenchTally { result.tally }

    /// Latency percentiles in microseconds, with their JSON names.
    public var percentiles: [(name: String, label: String, microseconds: Double)] {
        Self.percentiles(of: tally.histogram)
    }

    /// `histogram`'s percentiles in microseconds, with their JSON names.
    public static func percentiles(of histogram: LatencyHistogram) -> [(name: String, label: String, microseconds: Double)] {
        [("p50", "p50", 50), ("p90", "p90", 90), ("p99", "p99", 99), ("p99_9", "p99.9", 99.9)].map {
            ($0.0, $0.1, Double(histogram.value(atPercentile: $0.2)) / 1000)
        } + [("max", "max", Double(histogram.maximum == 0 ? 0 : histogram.maximum) / 1000)]
    }

    private static func latencyText(_ histogram: LatencyHistogram) -> String {
        percentiles(of: histogram).map { "\($0.label) \(format($0.microseconds, 1))" }.joined(separator: "  ")
    }

    private static func latencyJSON(_ histogram: LatencyHistogram) -> String {
        let fields = percentiles(of: histogram).map { "\"\($0.name)\":\(format($0.microseconds, 3))" }
            + ["\"mean\":\(format(histogram.mean / 1000, 3))"]
        return "{\(fields.joined(separator: ","))}"
    }

    public var responseBytesPerRequest: Double {
        tally.answered == 0 ? 0 : Double(tally.responseBytes) / Double(tally.answered)
    }

    public var bodyBytesPerRequest: Double {
        tally.succeeded == 0 ? 0 : Double(tally.bodyBytes) / Double(tally.succeeded)
    }

    /// Errors as (label, count), most frequent first.
    public var errors: [(label: String, jsonKey: String, count: UInt64)] {
        var out: [(String, String, UInt64)] = tally.failedByCode.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { code, n in
                let name = StatusCode(rawValue: code).description
                return ("\(name) (\(code))", name, n)
            }
        if tally.idMismatches > 0 { out.append(("wrong id", "WRONG_ID", tally.idMismatches)) }
        if tally.wrongBodies > 0 { out.append(("wrong body", "WRONG_BODY", tally.wrongBodies)) }
        if tally.malformed > 0 { out.append(("malformed frame", "MALFORMED", tally.malformed)) }
        if tally.unanswered > 0 { out.append(("unanswered (connection lost)", "UNANSWERED", tally.unanswered)) }
        return out
    }

    /// "rps=N p50_us=N p99_us=N": always the last line of output.
    public var lastLine: String {
        let p = tally.histogram
        return "rps=\(Int(result.requestsPerSecond.rounded())) p50_us=\(Int((Double(p.value(atPercentile: 50)) / 1000).rounded())) p99_us=\(Int((Double(p.value(atPercentile: 99)) / 1000).rounded()))"
    }

    private var shape: String {
        let o = result.options
        let length: String
        switch o.length {
        case .requests(let n): length = "-n \(n)"
        case .seconds(let s): length = "-t \(Self.format(s, 1))"
        }
        return "\(o.method.label), -c \(o.connections) -P \(o.pipeline) \(length), \(o.threads) thread\(o.threads == 1 ? "" : "s")"
    }

    /// The human summary, ending with `lastLine`.
    public var text: String {
        var lines: [String] = []
        if BuildMode.isDebug { lines.append(BuildMode.debugWarning) }
        lines.append("groser-bench: \(shape)")
        lines.append("requests:        \(tally.answered) answered, \(tally.succeeded) ok, \(tally.failed) failed")
        lines.append("seconds:         \(Self.format(result.seconds, 3))")
        lines.append("requests/s:      \(Self.format(result.requestsPerSecond, 0)) (successful only)")
        lines.append("latency (µs):    " + Self.latencyText(tally.histogram))
        for part in result.parts {
            let t = part.tally
            let label = part.name + ":"
            let padding = String(repeating: " ", count: max(1, 17 - label.count))
            lines.append(label + padding + "\(part.method.label): \(t.succeeded) ok, \(t.failed) failed, "
                         + "\(Self.format(result.rate(of: t), 0)) requests/s")
            lines.append("  latency (µs):  " + Self.latencyText(t.histogram))
        }
        lines.append("response bytes:  \(Self.format(responseBytesPerRequest, 1)) per request (body \(Self.format(bodyBytesPerRequest, 1)))")
        if errors.isEmpty && tally.connectionFailures == 0 {
            lines.append("errors:          none")
        } else {
            lines.append("errors:          " + errors.map { "\($0.label): \($0.count)" }.joined(separator: ", "))
            if tally.connectionFailures > 0 { lines.append("connections failed: \(tally.connectionFailures)") }
        }
        lines.append(lastLine)
        return lines.joined(separator: "\n") + "\n"
    }

    /// One JSON object on one line, then `lastLine`.
    public var json: String {
        let o = result.options
        var fields: [String] = []
        if BuildMode.isDebug { fields.append("\"warning\":\(Self.quote(BuildMode.debugWarning))") }
        fields.append("\"debug_build\":\(BuildMode.isDebug)")
        fields.append("\"method\":\(Self.quote(o.method.label))")
        fields.append("\"connections\":\(o.connections)")
        fields.append("\"pipeline\":\(o.pipeline)")
        fields.append("\"threads\":\(o.threads)")
        fields.append("\"requests\":\(tally.answered + tally.unanswered)")
        fields.append("\"answered\":\(tally.answered)")
        fields.append("\"succeeded\":\(tally.succeeded)")
        fields.append("\"failed\":\(tally.failed)")
        fields.append("\"connection_failures\":\(tally.connectionFailures)")
        fields.append("\"seconds\":\(Self.format(result.seconds, 6))")
        fields.append("\"rps\":\(Self.format(result.requestsPerSecond, 1))")
        fields.append("\"latency_us\":\(Self.latencyJSON(tally.histogram))")
        for part in result.parts {
            let t = part.tally
            fields.append("\(Self.quote(part.name)):{\"method\":\(Self.quote(part.method.label)),\"succeeded\":\(t.succeeded),"
                          + "\"failed\":\(t.failed),\"rps\":\(Self.format(result.rate(of: t), 1)),"
                          + "\"latency_us\":\(Self.latencyJSON(t.histogram))}")
        }
        fields.append("\"response_bytes_per_request\":\(Self.format(responseBytesPerRequest, 1))")
        fields.append("\"body_bytes_per_request\":\(Self.format(bodyBytesPerRequest, 1))")
        fields.append("\"errors\":{\(errors.map { "\(Self.quote($0.jsonKey)):\($0.count)" }.joined(separator: ","))}")
        let codes = tally.failedByCode.keys.sorted().map { "\"\($0)\":\(tally.failedByCode[$0]!)" }
        fields.append("\"errors_by_code\":{\(codes.joined(separator: ","))}")
        return "{" + fields.joined(separator: ",") + "}\n" + lastLine + "\n"
    }

    /// `value` with `decimals` digits after the point, without Foundation.
    static func format(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = UInt64(scaled / scale)
        var text = (value < 0 && scaled > 0 ? "-" : "") + String(whole)
        if decimals > 0 {
            let fraction = String(UInt64(scaled - Double(whole) * scale))
            text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        return text
    }

    static func quote(_ s: String) -> String { JSONString.quoted(s) }
}
