import GroserSystem
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

/// A logger passed to the parts that log, never global. Messages are built
/// only when their level is enabled. Tests capture lines with their own sink.
public struct Logger: Sendable {
    public var level: LogLevel
    private let sink: @Sendable (String) -> Void

    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
    }

    /// Lines to standard error: `2026-12-02T16:45:23Z INFO groserd: message`.
    public static func standardError(level: LogLevel) -> Logger {
        Logger(level: level) { line in StandardStreams.err(line + "\n") }
    }

    /// A logger that drops everything.
    public static let silent = Logger(level: .error) { _ in }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= self.level else { return }
        sink("\(Self.timestamp()) \(level.label) groserd: \(message())")
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    private static func timestamp() -> String {
        var t = time(nil)
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }
}
