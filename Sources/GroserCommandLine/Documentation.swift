/// The manual page and the Markdown reference, generated from the command
/// tree so they cannot say something the parser does not do. Neither holds
/// a date, so regenerating them changes nothing unless the tree changed.
extension CommandLineProgram {
    /// A roff manual page for section 1.
    public func manual() -> String {
        func roff(_ s: String) -> String {
            var out = s.replacingOccurrences("\\", "\\e").replacingOccurrences("-", "\\-")
            // A line starting with "." or "'" would be a request.
            out = out.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
            return out
        }
        func option(_ o: OptionSpec) -> String {
            let names = o.spellings.reversed().map { "\\fB\(roff($0))\\fR" }.joined(separator: ", ")
            return ".TP\n\(names)\(o.valueName.map { " \\fI\(roff($0))\\fR" } ?? "")\n\(roff(o.fullHelp))\n"
        }
        var s = ".\\\" Generated from \(name)'s command tree (\(name) generate-manual); do not edit.\n"
        s += ".TH \(roff(name.uppercased())) 1 \"\" \"\(roff(name)) \(roff(version))\" \"User Commands\"\n"
        s += ".SH NAME\n\(roff(name)) \\- \(roff(root.abstract))\n"
        s += ".SH SYNOPSIS\n.B \(roff(name))\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n"
        s += ".SH DESCRIPTION\n\(roff(root.abstract))\n"
        if !root.discussion.isEmpty { s += ".PP\n\(roff(root.discussion))\n" }
        s += ".SH OPTIONS\nThese may come before or after the command.\n" + root.options.map(option).joined()
        s += ".SH COMMANDS\n"
        for chain in allChains().dropFirst() {
            let command = chain.last!
            s += ".SS \"\(roff(chain.dropFirst().map(\.name).joined(separator: " ")))\"\n"
            s += ".B \(roff(usageLine(chain)))\n.PP\n\(roff(command.abstract))\n"
            if !command.discussion.isEmpty { s += ".PP\n\(roff(command.discussion))\n" }
            for a in command.arguments {
                s += ".TP\n\\fI\(roff(a.name))\\fR\n\(roff(a.help + Self.choiceNote(a.choices)))\(a.isOptional ? " (optional)" : "")\n"
            }
            s += command.options.map(option).joined()
            for e in command.exitCodes { s += ".TP\nexit \\fB\(e.code)\\fR\n\(roff(e.meaning))\n" }
        }
        s += ".SH EXIT STATUS\n" + exitCodes.map { ".TP\n.B \($0.code)\n\(roff($0.meaning))\n" }.joined()
        return s
    }

    /// A Markdown reference: every command, option and exit code.
    public func markdown() -> String {
        func cell(_ s: String) -> String { s.replacingOccurrences("|", "\\|").replacingOccurrences("\n", " ") }
        func options(_ list: [OptionSpec]) -> String {
            var t = "| Option | Meaning |\n|---|---|\n"
            for o in list {
                t += "| `\(o.spellings.reversed().joined(separator: "`, `"))\(o.valueName.map { " \($0)" } ?? "")` | \(cell(o.fullHelp))\(o.isRequired ? " (required)" : "") |\n"
            }
            return t
        }
        var s = "<!-- Generated from \(name)'s command tree by tools/gen-cli-docs (\(name) generate-docs); do not edit. -->\n"
        s += "# \(name) \(version)\n\n\(root.abstract)\n\n"
        if !root.discussion.isEmpty { s += "\(root.discussion)\n\n" }
        s += "```\n\(usageLine([root]))\n```\n\n"
        s += "## Global options\n\nThey may come before or after the command.\n\n" + options(root.options) + "\n"
        s += "## Exit codes\n\n| Code | Meaning |\n|---|---|\n"
        s += exitCodes.map { "| \($0.code) | \(cell($0.meaning)) |\n" }.joined() + "\n"
        s += "## Commands\n\n"
        for chain in allChains().dropFirst() {
            s += "- [`\(chain.dropFirst().map(\.name).joined(separator: " "))`](#\(chain.dropFirst().map(\.name).joined(separator: "-"))): \(cell(chain.last!.abstract))\n"
        }
        for chain in allChains().dropFirst() {
            let command = chain.last!
            let title = chain.dropFirst().map(\.name).joined(separator: " ")
            s += "\n\(chain.count == 2 ? "###" : "####") \(title)\n\n```\n\(usageLine(chain))\n```\n\n\(command.abstract)\n\n"
            if !command.discussion.isEmpty { s += "\(command.discussion)\n\n" }
            if !command.arguments.isEmpty {
                s += "| Argument | Meaning |\n|---|---|\n"
                for a in command.arguments {
                    s += "| `\(a.name)` | \(cell(a.help + Self.choiceNote(a.choices)))\(a.isOptional ? " (optional)" : "") |\n"
                }
                s += "\n"
            }
            if !command.options.isEmpty { s += options(command.options) + "\n" }
            if !command.visibleSubcommands.isEmpty {
                s += "Subcommands: " + command.visibleSubcommands.map { "`\($0.name)`" }.joined(separator: ", ") + ".\n\n"
            }
            if !command.exitCodes.isEmpty {
                s += "| Exit code | Meaning |\n|---|---|\n" + command.exitCodes.map { "| \($0.code) | \(cell($0.meaning)) |\n" }.joined() + "\n"
            }
        }
        return s
    }
}
