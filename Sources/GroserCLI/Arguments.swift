/// A command line that cannot be run as written: exit code 2.
public struct UsageError: Error, Sendable {
    public var message: String
    /// The help text of the command it concerns.
    public var help: String?
    init(_ message: String, help: String? = nil) {
        self.message = message
        self.help = help
    }
}

/// One option a command accepts; `valueName` nil means a flag.
struct OptionSpec: Sendable {
    var name: String
    var valueName: String?
    var help: String
}

/// A command's words after parsing: options by name, flags, and positionals.
struct ParsedArguments {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    /// Splits `arguments` by `specs`, accepting "--name value" and
    /// "--name=value" anywhere among positionals; "--" ends options.
    static func parse(_ arguments: [String], specs: [OptionSpec], help: String) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var i = 0
        var optionsEnded = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if optionsEnded || !arg.hasPrefix("-") || arg == "-" {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" { optionsEnded = true; continue }
            var name = arg
            var inline: String?
            if let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            if name == "-h" { name = "--help" }
            guard let spec = specs.first(where: { $0.name == name }) else {
                throw UsageError("unknown option \(name)", help: help)
            }
            if let valueName = spec.valueName {
                if let inline {
                    parsed.values[name] = inline
                } else {
                    guard i < arguments.count else { throw UsageError("\(name) needs a value (\(valueName))", help: help) }
                    parsed.values[name] = arguments[i]
                    i += 1
                }
            } else {
                guard inline == nil else { throw UsageError("\(name) takes no value", help: help) }
                parsed.flags.insert(name)
            }
        }
        return parsed
    }
}
