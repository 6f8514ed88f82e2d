import GroserCommandLine
import Testing

/// A small tree: what the parser does, without a binary.
private let program = CommandLineProgram<String>(
    name: "shop", version: "1.2.3", abstract: "A test program.",
    globalOptions: [OptionSpec(name: "--socket", valueName: "PATH", help: "the socket"),
                    OptionSpec(name: "--verbose", shortName: "v", help: "say more")],
    commands: [
        CommandSpec(name: "cities", abstract: "Lists cities.",
                    options: [OptionSpec(name: "--output", shortName: "o", valueName: "FORMAT", help: "list format", choices: ["json", "tsv"])],
                    validate: { p in "cities \(p.values["--output"] ?? "-")" }),
        CommandSpec(name: "cart", abstract: "Shows the cart.",
                    options: [OptionSpec(name: "--city", valueName: "CODE", help: "a city")],
                    subcommands: [
                        CommandSpec(name: "add", abstract: "Adds a product.",
                                    options: [OptionSpec(name: "--qty", valueName: "N", help: "how many", defaultValue: "1"),
                                              OptionSpec(name: "--city", valueName: "CODE", help: "a city")],
                                    arguments: [ArgumentSpec("PRODUCT", "a product uid")],
                                    validate: { p in "add \(p.positionals[0]) \(p.values["--qty"] ?? "1") \(p.values["--city"] ?? "-")" }),
                    ],
                    validate: { p in "show \(p.values["--city"] ?? "-")" }),
        CommandSpec(name: "admin", abstract: "Operators' commands.", subcommands: [
            CommandSpec(name: "export", abstract: "Exports.", validate: { _ in "export" }),
        ]),
    ],
    exitCodes: [ExitCodeSpec(0, "ok"), ExitCodeSpec(2, "usage error")])

private func run(_ args: [String]) -> String {
    switch program.parse(args) {
    case .run(let action, let parsed): return action + (parsed.flags.contains("--verbose") ? " verbose" : "")
    case .output(let text): return "OUTPUT " + text
    case .usageError(let e, _): return "USAGE " + program.render(e)
    }
}

@Suite struct CommandLineProgramTests {
    @Test(arguments: [
        (["cities"], "cities -"),
        (["-v", "cities", "-o", "json"], "cities json verbose"),
        (["cities", "-ojson", "--verbose"], "cities json verbose"),
        (["cities", "--output=tsv"], "cities tsv"),
        (["cart"], "show -"),
        (["cart", "--city", "SPB", "add", "p1"], "add p1 1 SPB"),
        (["cart", "add", "p1", "--qty", "3", "--city", "KZN"], "add p1 3 KZN"),
        (["--socket", "/s", "cart", "add", "--", "-p"], "add -p 1 -"),
    ])
    func parses(args: [String], expected: String) {
        #expect(run(args) == expected)
    }

    @Test(arguments: [
        (["carts"], "unknown command \"carts\"; did you mean \"cart\"?"),
        (["cities", "--ouput", "json"], "unknown option --ouput; did you mean \"--output\"?"),
        (["cities", "-o", "jsn"], "-o must be json or tsv, not \"jsn\"; did you mean \"json\"?"),
        (["--socket", "cities"], "--socket needs a value: \"cities\" was read as its PATH, leaving no command"),
        (["--socket"], "--socket needs a value (PATH)"),
        ([], "no command given"),
        (["cart", "add"], "missing PRODUCT"),
        (["cart", "add", "a", "b"], "unexpected argument \"b\""),
        (["admin"], "admin needs a subcommand: export"),
        (["admin", "exprot"], "unknown admin subcommand \"exprot\"; did you mean \"export\"?"),
        (["help", "crat"], "did you mean \"cart\"?"),
    ])
    func refuses(args: [String], message: String) {
        let text = run(args)
        #expect(text.hasPrefix("USAGE "), "\(text)")
        #expect(text.contains(message), "\(text)")
        #expect(text.split(separator: "\n").count == 3, "a usage error is three lines, not the whole help: \(text)")
        #expect(text.contains("see 'shop"), "\(text)")
    }

    @Test func usageLineIsTheCommandsOwn() {
        #expect(run(["cart", "add"]).contains("usage: shop cart add PRODUCT [--qty N] [--city CODE]\n"))
        #expect(run(["cart", "add"]).contains("see 'shop cart add --help'"))
    }

    @Test func helpAndVersion() {
        #expect(run(["--version"]) == "OUTPUT shop 1.2.3\n")
        #expect(run(["cart", "--version"]) == "OUTPUT shop 1.2.3\n")
        let help = run(["help", "cart", "add"])
        #expect(help.hasPrefix("OUTPUT usage: shop cart add PRODUCT"))
        #expect(help.contains("--qty N") && help.contains("(default: 1)") && help.contains("--socket PATH"))
        #expect(run(["cart", "add", "--help"]) == help)
        let root = run(["--help"])
        #expect(root.contains("commands:") && root.contains("cities") && root.contains("exit codes:") && !root.contains("generate-docs"))
        #expect(run(["help"]) == root)
    }

    @Test func editDistanceCountsASwapAsOneTypo() {
        #expect(Suggestions.distance(Array("cart"), Array("crat")) == 1)
        #expect(Suggestions.distance(Array("kitten"), Array("sitting")) == 3)
        #expect(Suggestions.closest(to: "xyz", among: ["cart", "cities"]).isEmpty)
    }

    @Test func generatedScriptsNameEveryCommandAndOption() {
        for script in [program.bashCompletion(), program.zshCompletion(), program.fishCompletion(), program.markdown(), program.manual()] {
            for word in ["cities", "cart", "add", "export", "qty", "socket", "output"] {
                #expect(script.contains(word), "\(word) missing from \(script.prefix(60))")
            }
        }
    }
}
