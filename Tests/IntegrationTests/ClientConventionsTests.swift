import Foundation
import GroserSystem
import Testing

/// groser-client's conventions through the real binary: help, did-you-mean,
/// short usage errors, --version, every exit code, -o, -v, errors under
/// --json, completion, and the generated documents (issue 14).
@Suite("groser-client's command line", .serialized)
struct ClientConventionsTests {
    let daemon: Daemon
    let configHome: String
    init() throws {
        daemon = try Daemon()
        configHome = daemon.directory + "/config"
    }

    func run(_ args: [String], socket: String? = nil) throws -> (status: Int32, out: String, err: String) {
        try runClient(args, socket: socket ?? daemon.socketPath, configHome: configHome)
    }

    /// Starts groser-client with its output in files, for tests that signal it.
    func start(_ args: [String], stdout: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.groserClient)
        p.arguments = args
        p.environment = minimalEnvironment(["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": configHome])
        _ = FileManager.default.createFile(atPath: stdout, contents: nil)
        p.standardOutput = FileHandle(forWritingAtPath: stdout)!
        p.standardError = FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Waits up to 10 s for `p` to end, then kills it, so a client that
    /// ignored the signal fails the test instead of hanging it.
    func waitOrKill(_ p: Process) {
        if !eventually(seconds: 10, { !p.isRunning }) { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
    }

    /// A usage error is three lines on stderr (what is wrong, the usage
    /// line, where to read more), exit 2, nothing on stdout.
    func expectShortUsageError(_ r: (status: Int32, out: String, err: String), _ text: String,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 2, "\(r.err)", sourceLocation: sourceLocation)
        #expect(r.out.isEmpty, sourceLocation: sourceLocation)
        #expect(r.err.contains(text), "\(r.err)", sourceLocation: sourceLocation)
        #expect(r.err.split(separator: "\n").count == 3 && r.err.contains("usage: groser-client") && r.err.contains("--help'"),
                "a short usage line and a pointer to --help, not the whole help: \(r.err)", sourceLocation: sourceLocation)
        #expect(!r.err.contains("global options"), sourceLocation: sourceLocation)
    }

    @Test func didYouMeanForACommandASubcommandAndAnOption() throws {
        expectShortUsageError(try run(["carts"]), "unknown command \"carts\"; did you mean \"cart\"?")
        expectShortUsageError(try run(["cart", "ad", "p"]), "did you mean \"add\"?")
        expectShortUsageError(try run(["cities", "--jsno"]), "unknown option --jsno; did you mean \"--json\"?")
        expectShortUsageError(try run(["search", "milk", "--in-stok"]), "did you mean \"--in-stock\"?")
    }

    @Test func usageErrorsAreShortAndNameTheCommand() throws {
        let r = try run(["shelf"])
        expectShortUsageError(r, "groser-client shelf: missing UID")
        #expect(r.err.contains("usage: groser-client shelf UID") && r.err.contains("see 'groser-client shelf --help'"))
        expectShortUsageError(try run(["--bogus"]), "unknown option --bogus")
        expectShortUsageError(try run(["checkout", "--name", "IVAN PETROV"]), "--exp MM/YY is required")
        expectShortUsageError(try run(["--timeout", "0.0005", "cities"]), "--timeout must be a number of seconds from 0.001 (1 ms)")
        expectShortUsageError(try run(["--socket", "", "cities"]), "--socket needs a non-empty path")
        expectShortUsageError(try run(["help", "crt"]), "did you mean \"cart\"?")
    }

    @Test func aCommandNameTakenAsAnOptionsValueIsSaidSo() throws {
        let r = try run(["--socket", "cities"])
        expectShortUsageError(r, "--socket needs a value: \"cities\" was read as its PATH")
        #expect(!r.err.contains("no command given"))
    }

    @Test func versionOnEveryBinary() throws {
        #expect(try run(["--version"]) == (0, "groser-client 0.1.0\n", ""))
        #expect(try run(["cities", "--version"]).out == "groser-client 0.1.0\n")
        for (binary, expected) in [(Daemon.groserd, "groserd 0.1.0"), (Daemon.binDirectory + "/groser-bench", "groser-bench 0.1.0")] {
            let r = try runProgram(binary, ["--version"], environment: minimalEnvironment())
            #expect(r.status == 0 && r.out.hasPrefix(expected), "\(binary): \(r.out)\(r.err)")
        }
    }

    @Test func helpCartIsTheSameAsCartHelpAndComplete() throws {
        let help = try run(["help", "cart"])
        #expect(help.status == 0)
        #expect(help.out == (try run(["cart", "--help"])).out)
        #expect(help.out.hasPrefix("usage: groser-client cart [SUBCOMMAND] [--accept-prices] [--city CODE] [--store UID]"))
        for word in ["add ", "set ", "remove ", "clear ", "--city CODE", "--socket PATH", "--timeout SECONDS", "--json", "-v, --verbose"] {
            #expect(help.out.contains(word), "\(word) missing from help cart")
        }
        let add = try run(["help", "cart", "add"])
        #expect(add.out.hasPrefix("usage: groser-client cart add PRODUCT [--qty N]") && add.out.contains("(default: 1)"))
        let admin = try run(["admin", "--help"])
        #expect(admin.out.contains("--admin-group") && admin.out.contains("set-product") && admin.out.contains("71"))
        #expect(try run(["admin", "set-product", "--help"]).out.contains("--price AMOUNT"))
        let root = try run(["help"])
        #expect(root.status == 0 && root.out.contains("commands:") && root.out.contains("exit codes:"))
        for code in ["68", "130", "74"] { #expect(root.out.contains(code), "exit code \(code) is documented") }
    }

    @Test func globalOptionsComeBeforeOrAfterTheCommand() throws {
        let elsewhere = daemon.directory + "/nothing.sock"
        #expect(try run(["cities", "--socket", daemon.socketPath, "--json"], socket: elsewhere).status == 0)
        #expect(try run(["--json", "--socket", daemon.socketPath, "cities"], socket: elsewhere).status == 0)
        #expect(try run(["--socket=\(daemon.socketPath)", "cities", "-o", "jsonl"], socket: elsewhere).status == 0)
    }

    @Test func aClientSideDeadlineExits68AndSaysSoUnderJSON() throws {
        kill(daemon.process.processIdentifier, SIGSTOP)
        defer { kill(daemon.process.processIdentifier, SIGCONT) }
        let r = try run(["cities", "--timeout", "0.3"])
        #expect(r.status == 68, "\(r.err)")
        #expect(r.err.contains("no answer within 0.3 s") && r.err.split(separator: "\n").count == 1, "\(r.err)")
        let json = try run(["cities", "--timeout", "0.3", "--json"])
        #expect(json.status == 68)
        #expect(json.out.contains("\"code\": \"DEADLINE_EXCEEDED\""), "\(json.out)")
    }

    @Test func transportAndUsageErrorsUnderJSONAreJSONOnStdoutWithTheSameExitCode() throws {
        let down = try run(["cities", "--json"], socket: daemon.directory + "/nothing.sock")
        #expect(down.status == 1)
        let object = try JSONSerialization.jsonObject(with: Data(down.out.utf8)) as? [String: Any]
        #expect(object?["code"] as? String == "UNAVAILABLE" && (object?["message"] as? String)?.contains("cannot connect") == true)
        let usage = try run(["shelf", "--json"])
        #expect(usage.status == 2)
        #expect((try JSONSerialization.jsonObject(with: Data(usage.out.utf8)) as? [String: Any])?["code"] as? String == "INVALID_ARGUMENT")
        let refused = try run(["--json", "shelf", "shf-nope"])
        #expect(refused.status == 69 && refused.out.contains("\"code\": \"NOT_FOUND\""))
    }

    @Test func anInterruptExits130() throws {
        let file = daemon.directory + "/watch.out"
        let watch = try start(["watch", "--city", "SPB"], stdout: file)
        #expect(eventually { ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").contains("version") }, "watch printed its first line")
        kill(watch.processIdentifier, SIGINT)
        waitOrKill(watch)
        #expect(watch.terminationReason == .exit && watch.terminationStatus == 130)

        let latencyFile = daemon.directory + "/latency.out"
        func serverInfoCalls() -> UInt64 {
            ((try? daemon.client().stats())?.methods.first { $0.method == "ServerInfo" }?.requests) ?? 0
        }
        let before = serverInfoCalls()
        let latency = try start(["--latency"], stdout: latencyFile)
        // Its first ServerInfo is answered once it measures, with Ctrl-C deferred.
        #expect(eventually { serverInfoCalls() > before }, "groser-client --latency made no call")
        kill(latency.processIdentifier, SIGINT)
        waitOrKill(latency)
        #expect(latency.terminationReason == .exit && latency.terminationStatus == 130)
        let summary = (try? String(contentsOfFile: latencyFile, encoding: .utf8)) ?? ""
        #expect(summary.hasPrefix("min: ") && summary.contains(" samples)"), "the summary is printed before exiting: \(summary)")
    }

    @Test func latencyWithACountPrintsMinAvgMax() throws {
        let r = try run(["latency", "--count", "5", "--interval", "0"])
        #expect(r.status == 0)
        #expect(r.out.range(of: #"^min: \d+\.\d{3} ms, avg: \d+\.\d{3} ms, max: \d+\.\d{3} ms \(5 samples\)\n$"#,
                            options: .regularExpression) != nil, "\(r.out)")
    }

    @Test func aWriteErrorOnStdoutExits1AndSaysSo() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.groserClient)
        p.arguments = ["cities"]
        p.environment = minimalEnvironment(["GROSER_SOCKET": daemon.socketPath])
        p.standardOutput = FileHandle(forWritingAtPath: "/dev/full")!
        let err = Pipe()
        p.standardError = err
        try p.run()
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect(e == "groser-client: cannot write output: No space left on device\n")
    }

    @Test func pricesChangedStopsCheckoutWith74NotOutOfStocks73() throws {
        let cities = try run(["get-store", "--city", "SPB", "--products", "--json"])
        let product = try #require(cities.out.range(of: #"prd-spb-1-\d+"#, options: .regularExpression).map { String(cities.out[$0]) })
        #expect(try run(["cart", "add", product, "--city", "SPB"]).status == 0)
        #expect(try run(["admin", "set-product", product, "--price", "12345.67"]).status == 0)
        let args = ["checkout", "--city", "SPB", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin"]
        let env = minimalEnvironment(["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": configHome])
        let stopped = try runProgram(Daemon.groserClient, args, environment: env, input: "4111 1111 1111 1111\n123\n")
        #expect(stopped.status == 74, "\(stopped.err)")
        #expect(stopped.err.contains("ABORTED: Prices changed since they were accepted"), "\(stopped.err)")
        // Running it again does not accept the price (reads never change state); cart --accept-prices does.
        let again = try runProgram(Daemon.groserClient, args, environment: env, input: "4111 1111 1111 1111\n123\n")
        #expect(again.status == 74, "\(again.err)")
        // The answer to accepting is the accepted cart: the line says what was
        // accepted, and nothing says the price is still to be accepted.
        let accepting = try run(["cart", "--accept-prices", "--city", "SPB"])
        #expect(accepting.status == 0)
        #expect(accepting.out.contains("price accepted (was "), "\(accepting.out)")
        #expect(!accepting.out.contains("price changed from") && !accepting.out.contains("not accepted yet"), "\(accepting.out)")
        #expect(accepting.out.contains("The new prices are accepted"), "\(accepting.out)")
        let accepted = try runProgram(Daemon.groserClient, args, environment: env, input: "4111 1111 1111 1111\n123\n")
        #expect(accepted.status == 0, "after cart --accept-prices: \(accepted.err)")
    }

    @Test func listsAsJSONJSONLinesAndTSV() throws {
        let json = try run(["cities", "-o", "json"])
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [[String: Any]])
        #expect(array.count >= 5 && array.contains { $0["code"] as? String == "SPB" })
        let lines = try run(["cities", "--output=jsonl"]).out.split(separator: "\n")
        #expect(lines.count == array.count)
        #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) is [String: Any] })
        let tsv = try run(["cities", "-o", "tsv"]).out.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
        let header = try #require(tsv.first)
        #expect(header.contains("code") && header.contains("defaultStoreUid"))
        #expect(tsv.count == array.count + 1 && tsv.allSatisfy { $0.count == header.count })
        let shelf = try run(["search", "молоко", "--city", "SPB", "-o", "tsv"])
        #expect(shelf.status == 0 && shelf.out.split(separator: "\n").first?.split(separator: "\t").contains("product.uid") == true,
                "\(shelf.out.prefix(200))")
        expectShortUsageError(try run(["cities", "-o", "yaml"]), "-o must be json, jsonl or tsv, not \"yaml\"")
    }

    @Test func verboseShowsSocketRequestIDDeadlineAndTime() throws {
        let r = try run(["-v", "info", "--timeout", "2.5"])
        #expect(r.status == 0)
        #expect(r.err.range(of: "^groser-client: \(daemon.socketPath): request 1, deadline 2500 ms, \\d+\\.\\d{3} ms: OK\\n$",
                            options: .regularExpression) != nil, "\(r.err)")
        #expect(!r.out.contains("request 1"))
    }

    @Test func theBashCompletionScriptLoadsAndCompletes() throws {
        let script = daemon.directory + "/completion.bash"
        let r = try run(["completion", "bash"])
        #expect(r.status == 0)
        try r.out.write(toFile: script, atomically: true, encoding: .utf8)
        let loaded = try runProgram("/bin/bash", ["-c", "source <(\(Daemon.groserClient) completion bash) && complete -p groser-client"],
                                    environment: minimalEnvironment())
        #expect(loaded.status == 0 && loaded.out.contains("complete -F _groser_client groser-client"), "\(loaded.err)")
        func complete(_ words: [String]) throws -> Set<String> {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let r = try runProgram("/bin/bash", ["-c", "source \(script); COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _groser_client; printf '%s\\n' \"${COMPREPLY[@]}\""],
                                   environment: minimalEnvironment())
            return Set(r.out.split(separator: "\n").map(String.init))
        }
        #expect(try complete(["groser-client", "ca"]) == ["cart", "call"])
        #expect(try complete(["groser-client", "cart", ""]) == ["add", "set", "remove", "clear"])
        #expect(try complete(["groser-client", "cart", "--"]).isSuperset(of: ["--city", "--store", "--socket", "--json", "--help"]))
        #expect(try complete(["groser-client", "--socket", "/x", "cart", "add", "--q"]) == ["--qty"])
        #expect(try complete(["groser-client", "cities", "-o", ""]) == ["json", "jsonl", "tsv"])
        #expect(try complete(["groser-client", "completion", ""]) == ["bash", "zsh", "fish"])
        for shell in ["zsh", "fish"] {
            let s = try run(["completion", shell])
            #expect(s.status == 0 && s.out.contains("set-product") && s.out.contains("admin"))
        }
    }

    @Test func theCheckedInCLIDocsAndManualAreWhatTheTreeGeneratesNow() throws {
        for (command, file) in [("generate-docs", "docs/CLI.md"), ("generate-manual", "docs/groser-client.1")] {
            let generated = try run([command])
            #expect(generated.status == 0)
            let committed = try String(contentsOfFile: repositoryRoot + "/" + file, encoding: .utf8)
            #expect(committed == generated.out, "\(file) is out of date: run tools/gen-cli-docs")
        }
        let docs = try run(["generate-docs"]).out
        for word in ["### cart", "#### cart add", "--admin-group", "| 68 |", "| 130 |", "--emit-defaults", "completion"] {
            #expect(docs.contains(word), "\(word) missing from docs/CLI.md")
        }
    }
}
