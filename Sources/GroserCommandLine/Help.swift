// The help a program prints: usage lines, command lists and option tables,
// wrapped to the terminal.

extension CommandLineProgram {
    /// "groser-client cart add PRODUCT [--qty N] [--city CODE] ..." for the
    /// last command of `chain`: its required options, arguments, and the
    /// other options in brackets; global options are summed up in one word.
    func usageLine(_ chain: [CommandSpec<Action>]) -> String {
        let command = chain.last!
        var words = chain.map(\.name)
        if chain.count == 1 { return words[0] + " [OPTIONS] COMMAND [ARGS]" }
        if !command.subcommands.isEmpty { words.append(command.validate == nil ? "SUBCOMMAND" : "[SUBCOMMAND]") }
        words += command.options.filter(\.isRequired).map(\.usageWord)
        for a in command.arguments { words.append(a.isOptional ? "[\(a.name)]" : a.name) }
        words += command.options.filter { !$0.isRequired }.map { "[\($0.usageWord)]" }
        return words.joined(separator: " ")
    }

    /// The help of the program (a chain of just the root) or of a command.
    func help(_ chain: [CommandSpec<Action>]) -> String {
        let command = chain.last!
        let isRoot = chain.count == 1
        var text = "usage: \(usageLine(chain))\n\n\(command.abstract)\n"
        if !command.discussion.isEmpty { text += "\n\(Self.wrap(command.discussion, width: 100))\n" }
        if !command.arguments.isEmpty {
            text += "\narguments:\n" + rows(command.arguments.map { ($0.name, $0.help + Self.choiceNote($0.choices)) })
        }
        if !command.visibleSubcommands.isEmpty {
            text += "\n\(isRoot ? "commands" : "subcommands"):\n" + rows(command.visibleSubcommands.map { ($0.name, $0.abstract) })
        }
        if !isRoot && !command.options.isEmpty {
            text += "\noptions:\n" + rows(command.options.map { ($0.synopsis, $0.fullHelp) })
        }
        text += "\nglobal options (before or after the command):\n" + rows(root.options.map { ($0.synopsis, $0.fullHelp) })
        if isRoot {
            text += "\nexit codes:\n" + rows(exitCodes.map { (String($0.code), $0.meaning) })
            text += "\nsee '\(name) help COMMAND' (or COMMAND --help) for a command's arguments and options.\n"
        } else {
            let codes = chain.flatMap(\.exitCodes)
            if !codes.isEmpty { text += "\nexit codes besides the usual ones ('\(name) --help' lists them):\n" + rows(codes.map { (String($0.code), $0.meaning) }) }
            if !command.visibleSubcommands.isEmpty {
                text += "\nsee '\((chain.map(\.name) + ["SUBCOMMAND"]).joined(separator: " ")) --help' for a subcommand's.\n"
            }
        }
        return text
    }

    /// `text` broken at spaces into lines of at most `width` characters
    /// (longer words stay whole); its own line breaks are kept.
    static func wrap(_ text: String, width: Int) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { paragraph -> String in
            var lines: [String] = []
            var line = ""
            for word in paragraph.split(separator: " ") {
                if !line.isEmpty && line.count + 1 + word.count > width {
                    lines.append(line)
                    line = ""
                }
                line += (line.isEmpty ? "" : " ") + word
            }
            lines.append(line)
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    static func choiceNote(_ choices: [String]) -> String {
        choices.isEmpty ? "" : " (\(choices.joined(separator: ", ")))"
    }

    /// Two columns: names padded to a common width, text after.
    private func rows(_ pairs: [(String, String)]) -> String {
        let width = min(26, (pairs.map(\.0.count).max() ?? 0) + 2)
        var out = ""
        for (left, right) in pairs {
            let lines = right.split(separator: "\n", omittingEmptySubsequences: false)
            if left.count + 2 > width {
                out += "  \(left)\n" + lines.map { "  " + String(repeating: " ", count: width) + $0 + "\n" }.joined()
            } else {
                out += "  " + left + String(repeating: " ", count: width - left.count) + (lines.first ?? "") + "\n"
                out += lines.dropFirst().map { "  " + String(repeating: " ", count: width) + $0 + "\n" }.joined()
            }
        }
        return out
    }

    /// Every command's chain, depth first, hidden ones left out.
    func allChains() -> [[CommandSpec<Action>]] {
        var out: [[CommandSpec<Action>]] = []
        func walk(_ chain: [CommandSpec<Action>]) {
            out.append(chain)
            for sub in chain.last!.visibleSubcommands { walk(chain + [sub]) }
        }
        walk([root])
        return out
    }
}
