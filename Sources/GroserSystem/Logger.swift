import GroserWire
#if canImport(Glibc)
import Glibc
#endif

/// How much the daemon says.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case debug, info, warning, error

    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    var label: String {
        switch self {
        case .debug: "DEBUG"
        case .info: "INFO"
        case .warning: "WARNING"
        case .error: "ERROR"
        }
    }
}

/// How log lines are written.
public enum LogFormat: String, Sendable {
    /// `2026-12-02T16:45:23.123Z INFO groserd: message`
    case text
    /// `{"time":"2026-12-02T16:45:23.123Z","level":"info","message":"…"}`, one per line.
    case json
}

/// A logger passed to the parts that log, never global. Messages are built
/// only when their level is enabled. Tests capture lines with their own sink.
public struct Logger: Sendable {
    public var level: LogLevel
    public var format: LogFormat
    private let sink: @Sendable (String) -> Void

    public init(level: LogLevel, format: LogFormat = .text, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.format = format
        self.sink = sink
    }

    /// Lines to standard error: `2026-12-02T16:45:23.123Z INFO groserd: message`.
    public static func standardError(level: LogLevel, format: LogFormat = .text) -> Logger {
        Logger(level: level, format: format) { line in StandardStreams.err(line + "\n") }
    }

    /// A logger that drops everything.
    public static let silent = Logger(level: .error) { _ in }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= self.level else { return }
        switch format {
        case .text: sink("\(Self.timestamp()) \(level.label) groserd: \(message())")
        case .json:
            sink("{\"time\":\"\(Self.timestamp())\",\"level\":\"\(level.label.lowercased())\",\"message\":\(Self.quote(message()))}")
        }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    /// UTC with milliseconds: 2026-12-02T16:45:23.123Z.
    static func timestamp() -> String { rfc3339Milliseconds(wallClockNow()) }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quote(_ s: String) -> String { JSONString.quoted(s) }
}
