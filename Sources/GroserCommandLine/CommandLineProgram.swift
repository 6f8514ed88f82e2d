/// What a command line asks for once parsed.
public enum ParseOutcome<Action> {
    /// Run `action`; `arguments` holds the global options too.
    case run(Action, ParsedArguments)
    /// Print this on standard output and exit 0 (help, version, completion, manual).
    case output(String)
    /// Print `render(error)` on standard error and exit 2.
    case usageError(UsageError, ParsedArguments)
}

/// A program's whole command line: its global options, valid before or
/// after the command, its command tree, and its exit codes. It parses
/// arguments and generates the help of every command, `help COMMAND`,
/// did-you-mean suggestions, `--version`, the completion scripts for bash,
/// zsh and fish, a roff manual page and a Markdown reference, all from the
/// same declarations (the shape of swift-argument-parser's
/// `CommandConfiguration`, which groser cannot depend on).
public struct CommandLineProgram<Action>: Sendable {
    /// The root: the program's name, abstract, global options (`options`)
    /// and its commands (`subcommands`, built-in ones appended).
    public let root: CommandSpec<Action>
    public let version: String
    public let exitCodes: [ExitCodeSpec]

    /// The built-in options every command takes.
    static var helpOption: OptionSpec { OptionSpec(name: "--help", shortName: "h", help: "show help; COMMAND --help shows a command's") }
    static var versionOption: OptionSpec { OptionSpec(name: "--version", help: "print the version and exit") }

    /// A program called `name`, its global options, commands and exit codes;
    /// `help`, `completion` and the hidden `generate-manual` and
    /// `generate-docs` commands are added.
    public init(name: String, version: String, abstract: String, discussion: String = "", globalOptions: [OptionSpec],
                commands: [CommandSpec<Action>], exitCodes: [ExitCodeSpec]) {
        var builtins: [CommandSpec<Action>] = [
            CommandSpec(name: "help", abstract: "Shows the help of the program, a command or a subcommand.",
                        arguments: [ArgumentSpec("COMMAND", "a command, e.g. cart", isOptional: true),
                                    ArgumentSpec("SUBCOMMAND", "one of its subcommands, e.g. add", isOptional: true)]),
            CommandSpec(name: "completion", abstract: "Prints a shell completion script for bash, zsh or fish.",
                        discussion: """
                        Load it in the running shell with `source <(\(name) completion bash)` (bash, zsh), or \
                        `\(name) completion fish | source`; or save it where the shell looks for completions.
                        """,
                        arguments: [ArgumentSpec("SHELL", "the shell", choices: ["bash", "zsh", "fish"])]),
            CommandSpec(name: "generate-manual", abstract: "Prints the manual page (roff) generated from the command tree.", isHidden: true),
            CommandSpec(name: "generate-docs", abstract: "Prints the Markdown reference generated from the command tree.", isHidden: true),
        ]
        for (i, b) in [BuiltinCommand.help, .completion, .manual, .markdown].enumerated() { builtins[i].builtin = b }
        root = CommandSpec(name: name, abstract: abstract, discussion: discussion,
                           options: globalOptions + [Self.helpOption, Self.versionOption], subcommands: commands + builtins)
        self.version = version
        self.exitCodes = exitCodes
    }

    /// The program's name.
    public var name: String { root.name }

    /// The command at `path` below the root, with those above it.
    func commandChain(_ path: [String]) -> [CommandSpec<Action>]? {
        var chain = [root]
        for word in path {
            guard let next = chain.last!.subcommand(word) else { return nil }
            chain.append(next)
        }
        return chain
    }

    // MARK: Parsing

    /// Parses `arguments` (without the program's name). Global options may
    /// come before or after the command; "--" ends the options.
    public func parse(_ arguments: [String]) -> ParseOutcome<Action> {
        var parsed = ParsedArguments()
        var chain = [root]
        do {
            return try parse(arguments, into: &parsed, chain: &chain)
        } catch {
            var e = error
            if e.commandPath == nil { e.commandPath = parsed.commandPath }
            return .usageError(e, parsed)
        }
    }

    private func parse(_ arguments: [String], into parsed: inout ParsedArguments,
                       chain: inout [CommandSpec<Action>]) throws(UsageError) -> ParseOutcome<Action> {
        var optionsEnded = false
        var wantsHelp = false
        var wantsVersion = false
        // A value option given before any command, whose value was a command
        // name: "--socket cities" most likely forgot the path.
        var commandTakenAsValue: (option: String, word: String)?
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if !optionsEnded && arg == "--" { optionsEnded = true; continue }
            let command = chain.last!
            if !optionsEnded && arg.hasPrefix("-") && arg.count > 1 {
                let visible = command.options + (chain.count > 1 ? root.options : [])
                var name = arg
                var inline: String?
                if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                    name = String(arg[..<eq])
                    inline = String(arg[arg.index(after: eq)...])
                } else if !arg.hasPrefix("--"), arg.count > 2,
                          let short = visible.first(where: { !$0.isFlag && $0.spellings.contains(String(arg.prefix(2))) }) {
                    // "-ojson" is "-o json".
                    name = short.spellings.first { $0 == String(arg.prefix(2)) }!
                    inline = String(arg.dropFirst(2))
                }
                guard let spec = visible.first(where: { $0.spellings.contains(name) }) else {
                    throw UsageError("unknown option \(name)" + Self.didYouMean(name, among: visible.flatMap(\.spellings)))
                }
                if spec.name == "--help" { wantsHelp = true; continue }
                if spec.name == "--version" { wantsVersion = true; continue }
                guard !spec.isFlag else {
                    if inline != nil { throw UsageError("\(spec.name) takes no value") }
                    parsed.flags.insert(spec.name)
                    continue
                }
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard i < arguments.count, !visible.contains(where: { $0.spellings.contains(arguments[i]) }) else {
                        throw UsageError("\(name) needs a value (\(spec.valueName!))")
                    }
                    value = arguments[i]
                    i += 1
                    if chain.count == 1 && root.subcommand(value) != nil { commandTakenAsValue = (name, value) }
                }
                if !spec.choices.isEmpty && !spec.choices.contains(value) {
                    throw UsageError("\(name) must be \(Self.list(spec.choices)), not \"\(value)\"" + Self.didYouMean(value, among: spec.choices))
                }
                parsed.values[spec.name] = value
                continue
            }
            if !command.subcommands.isEmpty && parsed.positionals.isEmpty && !optionsEnded {
                if let sub = command.subcommand(arg) {
                    chain.append(sub)
                    parsed.commandPath.append(sub.name)
                    continue
                }
                if command.arguments.isEmpty {
                    let names = command.visibleSubcommands.map(\.name)
                    let what = chain.count == 1 ? "command" : "\(parsed.commandPath.joined(separator: " ")) subcommand"
                    throw UsageError("unknown \(what) \"\(arg)\"" + Self.didYouMean(arg, among: names, orList: true))
                }
            }
            parsed.positionals.append(arg)
        }

        let command = chain.last!
        if wantsHelp { return .output(help(chain)) }
        if wantsVersion { return .output("\(name) \(version)\n") }
        if chain.count == 1 {
            if let taken = commandTakenAsValue {
                throw UsageError("\(taken.option) needs a value: \"\(taken.word)\" was read as its \(root.options.first { $0.spellings.contains(taken.option) }?.valueName ?? "value"), leaving no command")
            }
            throw UsageError("no command given (commands: \(root.visibleSubcommands.map(\.name).joined(separator: ", ")))")
        }
        if command.validate == nil && command.builtin == nil {
            throw UsageError("\(parsed.commandPath.joined(separator: " ")) needs a subcommand: \(Self.list(command.visibleSubcommands.map(\.name)))")
        }
        for spec in command.options where spec.isRequired && parsed.values[spec.name] == nil {
            throw UsageError("\(spec.usageWord) is required")
        }
        let required = command.arguments.filter { !$0.isOptional }
        if parsed.positionals.count < required.count {
            throw UsageError("missing \(required[parsed.positionals.count].name)")
        }
        if parsed.positionals.count > command.arguments.count {
            throw UsageError("unexpected argument \"\(parsed.positionals[command.arguments.count])\"")
        }
        for (value, spec) in zip(parsed.positionals, command.arguments) where !spec.choices.isEmpty && !spec.choices.contains(value) {
            throw UsageError("\(spec.name) must be \(Self.list(spec.choices)), not \"\(value)\"" + Self.didYouMean(value, among: spec.choices))
        }
        switch command.builtin {
        case .help?:
            guard let target = commandChain(parsed.positionals) else {
                let known = commandChain(Array(parsed.positionals.dropLast())) ?? [root]
                let word = parsed.positionals[known.count - 1]
                throw UsageError("no help for \"\(parsed.positionals.joined(separator: " "))\": unknown \(known.count == 1 ? "command" : "subcommand") \"\(word)\""
                                 + Self.didYouMean(word, among: known.last!.visibleSubcommands.map(\.name), orList: true))
            }
            return .output(help(target))
        case .completion?:
            switch parsed.positionals[0] {
            case "bash": return .output(bashCompletion())
            case "zsh": return .output(zshCompletion())
            default: return .output(fishCompletion())
            }
        case .manual?: return .output(manual())
        case .markdown?: return .output(markdown())
        case nil: break
        }
        return .run(try command.validate!(parsed), parsed)
    }

    // MARK: Suggestions

    /// " (did you mean \"cart\"?)" for the candidates closest to `word`, or
    /// with `orList` the candidates themselves when none is close.
    static func didYouMean(_ word: String, among candidates: [String], orList: Bool = false) -> String {
        let close = Suggestions.closest(to: word, among: candidates)
        if !close.isEmpty { return "; did you mean \(close.map { "\"\($0)\"" }.joined(separator: " or "))?" }
        return orList ? " (\(candidates.joined(separator: ", ")))" : ""
    }

    static func list(_ words: [String]) -> String {
        words.count <= 1 ? words.joined() : words.dropLast().joined(separator: ", ") + " or " + words.last!
    }

    // MARK: Usage errors

    /// A usage error as printed: the message, the command's usage line, and
    /// where to read more. Never the whole help.
    public func render(_ error: UsageError) -> String {
        let path = error.commandPath ?? []
        let chain = commandChain(path) ?? [root]
        let full = ([name] + path).joined(separator: " ")
        return "\(full): \(error.message)\n" + "usage: \(usageLine(chain))\n"
            + "see '\(full) --help'\n"
    }
}

/// Edit distance suggestions for mistyped commands, options and values.
public enum Suggestions {
    /// The candidates at the smallest edit distance from `word`, if it is
    /// small for the word's length; a candidate `word` is a prefix of counts too.
    public static func closest(to word: String, among candidates: [String]) -> [String] {
        let bare = word.drop { $0 == "-" }.lowercased()
        guard !bare.isEmpty else { return [] }
        var best: [String] = []
        var bestDistance = Int.max
        for c in candidates {
            let candidate = c.drop { $0 == "-" }.lowercased()
            var d = distance(Array(bare), Array(candidate))
            if candidate.hasPrefix(bare) && bare.count >= 3 { d = min(d, 1) }
            guard d <= max(1, min(3, candidate.count / 3)) else { continue }
            if d < bestDistance { best = [c]; bestDistance = d } else if d == bestDistance && !best.contains(c) { best.append(c) }
        }
        return best
    }

    /// Damerau–Levenshtein distance (optimal string alignment): a swap of
    /// two neighbours is one typo, as people make them.
    public static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}
