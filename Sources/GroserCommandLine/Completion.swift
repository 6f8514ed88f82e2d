/// Completion scripts generated from the command tree: commands,
/// subcommands, options, the values of options and arguments with a fixed
/// set of choices, and file names where a file is expected.
extension CommandLineProgram {
    /// The shell function's name: "_groser_client".
    private var functionName: String { "_" + name.map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined() }

    /// Every command path below the root as words: ["cart", "add"].
    private var paths: [[CommandSpec<Action>]] { allChains().filter { $0.count > 1 } }

    /// Options that take a value, anywhere in the tree (so the command-finding
    /// loop skips their values).
    private var valueOptions: [OptionSpec] {
        var seen: Set<String> = []
        var out: [OptionSpec] = []
        for chain in allChains() {
            for o in chain.last!.options where !o.isFlag {
                for s in o.spellings where seen.insert(s).inserted { out.append(o) }
            }
        }
        return out
    }

    /// What may follow a command: its subcommands and argument choices.
    private func words(_ chain: [CommandSpec<Action>]) -> [String] {
        let command = chain.last!
        var words = command.visibleSubcommands.map(\.name)
        if let choices = command.arguments.first(where: { !$0.choices.isEmpty })?.choices { words += choices }
        if command.builtin == .help { words += root.visibleSubcommands.map(\.name) }
        return words
    }

    /// The options a command takes, offered once a word starts with "-".
    private func optionWords(_ chain: [CommandSpec<Action>]) -> [String] {
        var words = chain.last!.options.flatMap(\.spellings)
        if chain.count > 1 { words += root.options.flatMap(\.spellings) }
        return words
    }

    private func shellPath(_ chain: [CommandSpec<Action>]) -> String { chain.dropFirst().map { " " + $0.name }.joined() }

    /// A bash completion script (`complete -F`).
    public func bashCompletion() -> String {
        let f = functionName
        var s = "# bash completion for \(name), generated from its command tree (\(name) completion bash).\n"
        s += "\(f)() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmdpath=\"\" i w\n"
        s += "  for ((i = 1; i < COMP_CWORD; i++)); do\n    w=\"${COMP_WORDS[i]}\"\n    case \"$w\" in\n"
        let values = Set(valueOptions.flatMap(\.spellings)).sorted()
        if !values.isEmpty { s += "      \(values.joined(separator: "|"))) ((i++)) ;;\n" }
        s += "      -*) ;;\n      *) case \"$cmdpath $w\" in\n"
        s += "           \(paths.map { "\"\(shellPath($0))\"" }.joined(separator: "|"))) cmdpath=\"$cmdpath $w\" ;;\n"
        s += "         esac ;;\n    esac\n  done\n  case \"$prev\" in\n"
        for o in valueOptions {
            let spelled = o.spellings.joined(separator: "|")
            if !o.choices.isEmpty {
                s += "    \(spelled)) COMPREPLY=($(compgen -W \"\(o.choices.joined(separator: " "))\" -- \"$cur\")); return ;;\n"
            } else if o.takesFile {
                s += "    \(spelled)) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
            } else {
                s += "    \(spelled)) COMPREPLY=(); return ;;\n"
            }
        }
        s += "  esac\n  case \"$cmdpath\" in\n"
        s += chainArms { path, options, words, takesFile in
            "    \"\(path)\") if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"\(options)\" -- \"$cur\"));"
                + " else COMPREPLY=($(compgen -W \"\(words)\" -- \"$cur\"))\(takesFile ? "; COMPREPLY+=($(compgen -f -- \"$cur\"))" : ""); fi ;;\n"
        }
        s += "  esac\n}\ncomplete -F \(f) \(name)\n"
        return s
    }

    /// A zsh completion script (a `#compdef` function; also works when sourced).
    public func zshCompletion() -> String {
        let f = functionName
        var s = "#compdef \(name)\n# zsh completion for \(name), generated from its command tree (\(name) completion zsh).\n"
        s += "\(f)() {\n  local cmdpath=\"\" i w\n  for ((i = 2; i < CURRENT; i++)); do\n    w=${words[i]}\n    case $w in\n"
        let values = Set(valueOptions.flatMap(\.spellings)).sorted()
        if !values.isEmpty { s += "      (\(values.joined(separator: "|"))) ((i++)) ;;\n" }
        s += "      (-*) ;;\n      (*) case \"$cmdpath $w\" in\n"
        s += "           (\(paths.map { "\"\(shellPath($0))\"" }.joined(separator: "|"))) cmdpath=\"$cmdpath $w\" ;;\n"
        s += "         esac ;;\n    esac\n  done\n  case ${words[CURRENT-1]} in\n"
        for o in valueOptions {
            let spelled = o.spellings.joined(separator: "|")
            if !o.choices.isEmpty { s += "    (\(spelled)) compadd -- \(o.choices.joined(separator: " ")); return ;;\n" }
            else if o.takesFile { s += "    (\(spelled)) _files; return ;;\n" }
            else { s += "    (\(spelled)) return ;;\n" }
        }
        s += "  esac\n  case $cmdpath in\n"
        s += chainArms { path, options, words, takesFile in
            "    (\"\(path)\") if [[ $PREFIX == -* ]]; then compadd -- \(options);"
                + " else compadd -- \(words)\(takesFile ? "; _files" : ""); fi ;;\n"
        }
        s += "  esac\n}\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n  \(f) \"$@\"\nelse\n  compdef \(f) \(name)\nfi\n"
        return s
    }

    /// One `case` arm per command path, written by `arm` from the path, its
    /// options and its subcommands (each space-separated) and whether it
    /// takes a file: bash and zsh offer the options after a "-", else the
    /// subcommands (and files).
    private func chainArms(_ arm: (_ path: String, _ options: String, _ words: String, _ takesFile: Bool) -> String) -> String {
        allChains().map { chain in
            arm(shellPath(chain), optionWords(chain).joined(separator: " "), words(chain).joined(separator: " "),
                chain.last!.arguments.contains(where: \.takesFile))
        }.joined()
    }

    /// A fish completion script (`complete -c`).
    public func fishCompletion() -> String {
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences("\\", "\\\\").replacingOccurrences("'", "\\'") + "'" }
        var s = "# fish completion for \(name), generated from its command tree (\(name) completion fish).\n"
        s += "complete -c \(name) -f\n"
        func option(_ o: OptionSpec, condition: String?) -> String {
            var line = "complete -c \(name)"
            if let condition { line += " -n \(quoted(condition))" }
            if o.name.hasPrefix("--") { line += " -l \(o.name.dropFirst(2))" }
            if let short = o.shortName { line += " -s \(short)" } else if !o.name.hasPrefix("--") { line += " -s \(o.name.dropFirst())" }
            if !o.choices.isEmpty { line += " -x -a \(quoted(o.choices.joined(separator: " ")))" }
            else if o.takesFile { line += " -r -F" }
            else if !o.isFlag { line += " -x" }
            return line + " -d \(quoted(o.help.split(separator: "\n").first.map(String.init) ?? ""))\n"
        }
        for o in root.options { s += option(o, condition: nil) }
        for chain in allChains() {
            let command = chain.last!
            let condition: String
            if chain.count == 1 {
                condition = "__fish_use_subcommand"
            } else {
                let below = command.visibleSubcommands.map(\.name)
                condition = "__fish_seen_subcommand_from \(command.name)"
                    + (below.isEmpty ? "" : "; and not __fish_seen_subcommand_from \(below.joined(separator: " "))")
            }
            for sub in command.visibleSubcommands {
                s += "complete -c \(name) -n \(quoted(condition)) -a \(sub.name) -d \(quoted(sub.abstract))\n"
            }
            guard chain.count > 1 else { continue }
            for o in command.options { s += option(o, condition: condition) }
            for a in command.arguments where !a.choices.isEmpty {
                s += "complete -c \(name) -n \(quoted(condition)) -a \(quoted(a.choices.joined(separator: " ")))\n"
            }
            if command.arguments.contains(where: \.takesFile) { s += "complete -c \(name) -n \(quoted(condition)) -F\n" }
        }
        return s
    }
}

extension String {
    /// `self` with every `target` replaced (no Foundation here).
    func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
