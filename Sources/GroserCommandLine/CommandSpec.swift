/// One option a command accepts, declared once and read by the parser,
/// `--help`, the completion scripts, the manual and docs/CLI.md alike.
public struct OptionSpec: Sendable, Hashable {
    /// The spelling the parsed values are keyed by: "--city", or "-d" for
    /// an option that has only a short spelling.
    public var name: String
    /// A one-letter spelling ("v" for "-v"), if any.
    public var shortName: Character?
    /// What the value is called in help ("CODE"); nil for a flag.
    public var valueName: String?
    public var help: String
    /// What applies when the option is not given, shown in help.
    public var defaultValue: String?
    /// The only values accepted; also what completion offers.
    public var choices: [String]
    /// The command cannot run without it.
    public var isRequired: Bool
    /// Completion offers file names for the value.
    public var takesFile: Bool

    /// An option; give `valueName` for one that takes a value.
    public init(name: String, shortName: Character? = nil, valueName: String? = nil, help: String,
                defaultValue: String? = nil, choices: [String] = [], isRequired: Bool = false, takesFile: Bool = false) {
        self.name = name
        self.shortName = shortName
        self.valueName = valueName
        self.help = help
        self.defaultValue = defaultValue
        self.choices = choices
        self.isRequired = isRequired
        self.takesFile = takesFile
    }

    /// True when the option takes no value.
    public var isFlag: Bool { valueName == nil }

    /// Every way to write it: "--output" and "-o".
    public var spellings: [String] {
        var all = [name]
        if let shortName, "-\(shortName)" != name { all.append("-\(shortName)") }
        return all
    }

    /// "-o, --output FORMAT" as help lists it.
    public var synopsis: String {
        var s = name.hasPrefix("--") && shortName != nil ? "-\(shortName!), \(name)" : name
        if let valueName { s += " " + valueName }
        return s
    }

    /// "--city CODE" as a usage line writes it.
    var usageWord: String {
        let spelled = name.hasPrefix("--") ? name : (shortName.map { "-\($0)" } ?? name)
        return valueName.map { "\(spelled) \($0)" } ?? spelled
    }

    /// The help text with its default, as printed.
    var fullHelp: String {
        var text = help
        if !choices.isEmpty && !help.contains(choices.joined(separator: "|")) { text += " (\(choices.joined(separator: ", ")))" }
        if let defaultValue { text += " (default: \(defaultValue))" }
        return text
    }
}

/// A positional argument of a command.
public struct ArgumentSpec: Sendable, Hashable {
    /// How help names it: "UID".
    public var name: String
    public var help: String
    public var isOptional: Bool
    /// The only values accepted; also what completion offers.
    public var choices: [String]
    /// Completion offers file names.
    public var takesFile: Bool

    /// A positional argument, required unless `isOptional`.
    public init(_ name: String, _ help: String, isOptional: Bool = false, choices: [String] = [], takesFile: Bool = false) {
        self.name = name
        self.help = help
        self.isOptional = isOptional
        self.choices = choices
        self.takesFile = takesFile
    }
}

/// An exit status and what it means.
public struct ExitCodeSpec: Sendable, Hashable {
    public var code: Int32
    public var meaning: String

    /// `code` means `meaning`.
    public init(_ code: Int32, _ meaning: String) {
        self.code = code
        self.meaning = meaning
    }
}

/// A command line that cannot be run as written: exit code 2. The parser
/// fills in which command it concerns, so its usage line can be shown.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The command's path below the program ("cart", "add"); nil when unknown.
    public var commandPath: [String]?

    /// A usage error saying `message`.
    public init(_ message: String, commandPath: [String]? = nil) {
        self.message = message
        self.commandPath = commandPath
    }

    public var description: String { message }
}

/// A command's words after parsing: options by name (their long name),
/// flags, positionals, and which command they were given to.
public struct ParsedArguments: Sendable {
    /// The command and subcommand names after the program's ("cart", "add").
    public var commandPath: [String] = []
    /// Each option's value, the last one given.
    public var values: [String: String] = [:]
    /// Flags given.
    public var flags: Set<String> = []
    /// The positional arguments of the command, in order.
    public var positionals: [String] = []

    /// Nothing parsed yet.
    public init() {}
}

/// Which command a program provides itself, from its own tree.
enum BuiltinCommand: Sendable, Hashable {
    case help, completion, manual, markdown
}

/// A command or subcommand: declared once, with what it accepts and how to
/// check it before anything runs. `validate` turns the parsed words into the
/// action to run, or throws a `UsageError`; it is nil for a command that
/// only groups subcommands.
public struct CommandSpec<Action>: Sendable {
    public var name: String
    /// One sentence, shown in command lists.
    public var abstract: String
    /// More about it, shown in its help and the manual.
    public var discussion: String
    public var options: [OptionSpec]
    public var arguments: [ArgumentSpec]
    public var subcommands: [CommandSpec<Action>]
    /// Exit codes this command has besides the program's.
    public var exitCodes: [ExitCodeSpec]
    /// Left out of help and completion (tools' entry points).
    public var isHidden: Bool
    public var validate: (@Sendable (ParsedArguments) throws(UsageError) -> Action)?
    var builtin: BuiltinCommand?

    /// Declares a command.
    public init(name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [],
                arguments: [ArgumentSpec] = [], subcommands: [CommandSpec<Action>] = [], exitCodes: [ExitCodeSpec] = [],
                isHidden: Bool = false, validate: (@Sendable (ParsedArguments) throws(UsageError) -> Action)? = nil) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.arguments = arguments
        self.subcommands = subcommands
        self.exitCodes = exitCodes
        self.isHidden = isHidden
        self.validate = validate
    }

    /// The subcommand called `name`.
    public func subcommand(_ name: String) -> CommandSpec<Action>? { subcommands.first { $0.name == name } }

    var visibleSubcommands: [CommandSpec<Action>] { subcommands.filter { !$0.isHidden } }
}
