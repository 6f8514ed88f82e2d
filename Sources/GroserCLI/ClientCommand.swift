import GroserClient
import GroserSystem

/// groser-client: the root command. Returns the process exit code, as
/// grpcurl does: 0 success, 1 no connection or transport failure, 2 usage
/// error, 64 + status code when the server answered with an error.
public enum ClientCommand {
    public static let rootHelp: String = {
        var text = """
        usage: groser-client [--socket PATH] [--timeout SECONDS] [--json [--emit-defaults]] COMMAND [ARGS]

        Talks to groserd, the groser grocery catalog daemon.

        commands:

        """
        for c in Commands.all {
            let pad = String(repeating: " ", count: max(2, 12 - c.name.count))
            text += "  \(c.name)\(pad)\(c.abstract.split(separator: "\n").first ?? "")\n"
        }
        text += """

        global options:
          --socket PATH        groserd's socket (default: $GROSER_SOCKET, else the per-user default)
          --timeout SECONDS    give up on a call after this long (default: 10)
          --json               print Protobuf's canonical JSON mapping of the answer; errors groserd
                               answers with as {"code": "NOT_FOUND", "message": ...} on stdout
          --emit-defaults      with --json (and in call), also print fields that hold their default
          -h, --help           show help; COMMAND --help shows a command's

        exit codes: 0 ok, 1 cannot connect or transport failure, 2 usage error,
        64 + status code when groserd answers with an error (unknown city: 69).

        """
        return text
    }()

    /// Runs `arguments` (without the program name).
    public static func run(_ arguments: [String],
                           settingsPath: String = ClientSettings.defaultPath(),
                           out: @escaping (String) -> Void = StandardStreams.out,
                           err: @escaping (String) -> Void = StandardStreams.err) -> Int32 {
        // The command is the first word that is neither an option nor a
        // global option's value.
        var commandIndex: Int?
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--socket" || a == "--timeout" { i += 2; continue }
            if !a.hasPrefix("-") { commandIndex = i; break }
            i += 1
        }
        guard let commandIndex else {
            if arguments.contains("--help") || arguments.contains("-h") {
                out(rootHelp)
                return 0
            }
            err("groser-client: no command given\n\n" + rootHelp)
            return 2
        }
        let name = arguments[commandIndex]
        guard let command = Commands.all.first(where: { $0.name == name }) else {
            err("groser-client: unknown command \"\(name)\" (commands: \(Commands.all.map(\.name).joined(separator: ", ")))\n")
            return 2
        }
        var rest = arguments
        rest.remove(at: commandIndex)
        let help = command.help
        let action: (Context) throws -> Void
        let context: Context
        do {
            let parsed = try ParsedArguments.parse(rest, specs: command.options + GlobalOptions.specs, help: help)
            if parsed.flags.contains("--help") {
                out(help)
                return 0
            }
            var options = try GlobalOptions(parsed, help: help)
            if command.alwaysJSON { options.json = true }
            context = Context(options: options, settingsPath: settingsPath, out: out)
            action = try command.validate(parsed, help)
        } catch {
            err("groser-client \(name): \(error.message)\n")
            if let h = error.help { err("\n" + h) }
            return 2
        }
        do {
            try action(context)
            return 0
        } catch let error as UsageError {
            err("groser-client \(name): \(Terminal.safe(error.message))\n")
            return 2
        } catch let refused as CatalogFileRefused {
            for line in refused.lines { err("groser-client \(name): \(Terminal.safe(line))\n") }
            if context.options.json {
                out(ProtoJSON.json(Status(.invalidArgument, refused.lines.joined(separator: "\n"))).rendered() + "\n")
            }
            return 64 + StatusCode.invalidArgument.rawValue
        } catch is Cancelled {
            err("groser-client \(name): cancelled; nothing was changed\n")
            return 1
        } catch GroserError.server(let status) {
            // The message is the server's: escaped, and kept to one line.
            err("groser-client \(name): \(status.code): \(Terminal.safe(status.message))\n")
            // Under --json the status is also the answer on stdout, so a
            // script reading stdout sees why there is no body.
            if context.options.json { out(ProtoJSON.json(status).rendered() + "\n") }
            return 64 + status.code.rawValue
        } catch {
            // Settings errors quote the file; others may quote the server.
            err("groser-client \(name): \(Terminal.safe("\(error)"))\n")
            return 1
        }
    }
}
