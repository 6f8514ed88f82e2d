import GroserClient
import GroserCommandLine
import GroserSystem

/// What a command does once its arguments are checked.
typealias ClientAction = (Context) throws -> Void
/// A command of groser-client's tree.
typealias Subcommand = CommandSpec<ClientAction>

/// groser-client's exit codes, grpcurl's where it has one: declared once,
/// printed by `--help` and written into docs/CLI.md and the manual.
public enum ClientExit {
    public static let ok: Int32 = 0
    /// Cannot connect, the connection failed, a settings file cannot be
    /// read or saved, or standard output cannot be written.
    public static let failure: Int32 = 1
    public static let usage: Int32 = 2
    /// 64 + the status code groserd answered with.
    public static let serverBase: Int32 = 64
    /// No answer within --timeout: 64 + DEADLINE_EXCEEDED, as grpcurl.
    public static let deadline: Int32 = 68
    /// Ctrl-C, or a question answered no or a prompt cancelled: 128 + SIGINT, as shells report it.
    public static let interrupted: Int32 = 130

    static let all: [ExitCodeSpec] = [
        ExitCodeSpec(ok, "success"),
        ExitCodeSpec(failure, "cannot connect to groserd, the connection failed, a settings file cannot be read or saved, or standard output cannot be written"),
        ExitCodeSpec(usage, "usage error: the command line is wrong; nothing was sent"),
        ExitCodeSpec(serverBase, "and above: groserd answered with an error; the exit code is 64 + its status code, e.g. 67 INVALID_ARGUMENT, 69 NOT_FOUND, 71 PERMISSION_DENIED, 73 FAILED_PRECONDITION (out of stock), 74 ABORTED (the cart or its prices changed since it was shown), 80 UNAUTHENTICATED"),
        ExitCodeSpec(deadline, "no answer within --timeout (64 + DEADLINE_EXCEEDED, as grpcurl); a change may still have been applied"),
        ExitCodeSpec(interrupted, "interrupted (Ctrl-C), or a question answered no or a prompt cancelled; nothing was changed by a cancelled prompt"),
    ]
}

/// groser-client: the root command. Returns the process exit code
/// (`ClientExit`).
public enum ClientCommand {
    static let program = CommandLineProgram<ClientAction>(
        name: "groser-client", version: GroserRelease.version,
        abstract: "Talks to groserd, the groser grocery catalog daemon.",
        discussion: """
        Errors go to standard error, one line each. With --json the answer is Protobuf's canonical JSON mapping on \
        standard output, and so is every error, as {"code": ..., "message": ...}: groserd's own status code, \
        UNAVAILABLE when groserd cannot be reached, DEADLINE_EXCEEDED for a timeout, INVALID_ARGUMENT for a usage \
        error, CANCELLED for an interrupt and UNKNOWN for anything else (a settings file); the exit code is the same \
        as without --json.

        groser-client sends nothing to a server it does not trust. After connecting it reads the server's uid \
        from the socket (SO_PEERCRED) and refuses, before sending a byte, a groserd run by anyone but this user, \
        root, or the user named with --expect-server-uid (or GROSER_SERVER_UID): a member of groserd's \
        --socket-group whose groserd runs as another user (say, a web front end's user and a groserd run by the \
        user groser) names it, e.g. GROSER_SERVER_UID=groser. Under contrib/systemd's socket activation the \
        socket is systemd's, so the server is root and nothing needs naming. This holds for a socket named with \
        --socket or GROSER_SOCKET too. The per-user default socket's directory is checked and connected through \
        one descriptor; when it does not exist, no groserd runs there and groser-client says so (exit 1).
        """,
        globalOptions: GlobalOptions.specs, commands: Commands.all, exitCodes: ClientExit.all)

    /// Runs `arguments` (without the program name).
    public static func run(_ arguments: [String], settingsPath: String = ClientSettings.defaultPath()) -> Int32 {
        Interrupts.install(exitStatus: ClientExit.interrupted)
        let output = Output()
        let status = run(arguments, settingsPath: settingsPath, output: output)
        if let failure = output.failure {
            StandardStreams.err("groser-client: cannot write output: \(failure)\n")
            return ClientExit.failure
        }
        return status
    }

    private static func run(_ arguments: [String], settingsPath: String, output: Output) -> Int32 {
        // redis-cli's spelling of the latency command.
        var arguments = arguments
        if let i = arguments.firstIndex(of: "--latency"), !arguments[..<i].contains("--") { arguments[i] = "latency" }
        let out: (String) -> Void = output.write
        let err = StandardStreams.err
        let action: ClientAction
        let parsed: ParsedArguments
        switch program.parse(arguments) {
        case .output(let text):
            out(text)
            return ClientExit.ok
        case .usageError(let error, let partial):
            err(program.render(error))
            if wantsJSON(arguments, partial) { out(ProtoJSON.json(Status(.invalidArgument, error.message)).rendered() + "\n") }
            return ClientExit.usage
        case .run(let a, let p):
            action = a
            parsed = p
        }
        let name = "groser-client " + parsed.commandPath.joined(separator: " ")
        let json = wantsJSON(arguments, parsed)
        let context: Context
        do {
            var options = try GlobalOptions(parsed)
            if Commands.alwaysJSON.contains(parsed.commandPath.first ?? "") { options.json = true }
            context = Context(options: options, settingsPath: settingsPath, out: out, output: output)
        } catch {
            var e = error
            e.commandPath = parsed.commandPath
            err(program.render(e))
            if json { out(ProtoJSON.json(Status(.invalidArgument, e.message)).rendered() + "\n") }
            return ClientExit.usage
        }
        // Under --json an error is also the answer on stdout, so a script
        // reading stdout sees why there is no body.
        func fail(_ status: Int32, _ code: StatusCode, _ message: String) -> Int32 {
            err("\(name): \(Terminal.safe(message))\n")
            if json { out(ProtoJSON.json(Status(code, message)).rendered() + "\n") }
            return status
        }
        do {
            try action(context)
            return ClientExit.ok
        } catch let error as UsageError {
            let status = fail(ClientExit.usage, .invalidArgument, error.message)
            err("see '\(name) --help'\n")
            return status
        } catch let refused as CatalogFileRefused {
            for line in refused.lines { err("\(name): \(Terminal.safe(line))\n") }
            if json { out(ProtoJSON.json(Status(.invalidArgument, refused.lines.joined(separator: "\n"))).rendered() + "\n") }
            return ClientExit.serverBase + StatusCode.invalidArgument.rawValue
        } catch is Cancelled {
            return fail(ClientExit.interrupted, .cancelled, "cancelled; nothing was changed")
        } catch is Interrupted {
            return ClientExit.interrupted
        } catch GroserError.server(let status) {
            // The message is the server's: escaped, and kept to one line.
            err("\(name): \(status.code): \(Terminal.safe(status.message))\n")
            if json { out(ProtoJSON.json(status).rendered() + "\n") }
            return ClientExit.serverBase + status.code.rawValue
        } catch let error as GroserError {
            switch error {
            case .timedOut:
                return fail(ClientExit.deadline, .deadlineExceeded,
                            "\(error); groserd may still have applied a change it was asked for")
            case .cancelled:
                return fail(ClientExit.interrupted, .cancelled, error.description)
            default:
                return fail(ClientExit.failure, .unavailable, error.description)
            }
        } catch {
            // Settings errors quote the file; others may quote the server.
            return fail(ClientExit.failure, .unknown, "\(error)")
        }
    }

    /// --json given (before any "--"), or a command that always prints JSON.
    private static func wantsJSON(_ arguments: [String], _ parsed: ParsedArguments) -> Bool {
        parsed.flags.contains("--json") || arguments.prefix { $0 != "--" }.contains("--json")
            || Commands.alwaysJSON.contains(parsed.commandPath.first ?? "")
    }
}

/// Standard output that remembers its first write error: nothing more is
/// written after one, and the command then exits 1 saying so.
final class Output: @unchecked Sendable {
    // Written only from the command's own thread.
    private(set) var failure: Errno?

    func write(_ s: String) {
        guard failure == nil else { return }
        do { try StandardStreams.writeAll(s, fd: 1) } catch { failure = error }
    }
}

/// The person answered no, or closed a prompt.
struct Cancelled: Error {}

/// Ctrl-C ended a loop that finished its own way (the latency summary).
struct Interrupted: Error {}
