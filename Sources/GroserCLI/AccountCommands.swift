import GroserClient
import GroserCommandLine
import GroserSystem

// groser-client's account commands: register, login, logout, whoami, and
// how a password is read.

extension Commands {
    static let passwordOption = OptionSpec(name: "--password-stdin", valueName: nil,
                                           help: "read the password from the first line of standard input")

    static let register = Subcommand(
        name: "register",
        abstract: "Creates an account; log in afterwards.",
        discussion: """
        The password is read from a prompt with echo off (asked twice), or with --password-stdin from the first \
        line of standard input; never from an argument.
        """,
        options: [
            OptionSpec(name: "--email", valueName: "EMAIL", help: "the account's email (compared case-insensitively)", isRequired: true),
            OptionSpec(name: "--name", valueName: "NAME", help: "the account holder's name", isRequired: true),
            passwordOption,
        ],
        validate: { parsed throws(UsageError) in
            let email = parsed.values["--email"]!, name = parsed.values["--name"]!
            let fromStdin = try passwordSource(parsed)
            return { ctx in
                let password = try readPassword(fromStdin: fromStdin, confirm: true)
                let account = try ctx.client().register(email: email, password: password, name: name)
                ctx.print(.register(account),
                          human: "Registered \(account.name) <\(account.email)>; log in with: groser-client login --email \(account.email)\n")
            }
        })

    static let login = Subcommand(
        name: "login",
        abstract: "Logs in, merging the saved session's cart into the account's.",
        discussion: """
        The cart of the session saved for this groserd merges into the account's (lines of the same product are \
        summed, up to the line maximum); what was merged is printed. The saved session then becomes the \
        account's. The password is read as for register (asked once).
        """,
        options: [
            OptionSpec(name: "--email", valueName: "EMAIL", help: "the account's email", isRequired: true),
            passwordOption,
        ],
        validate: { parsed throws(UsageError) in
            let email = parsed.values["--email"]!
            let fromStdin = try passwordSource(parsed)
            return { ctx in
                let password = try readPassword(fromStdin: fromStdin, confirm: false)
                let client = ctx.client()
                let guest = try ctx.savedSession(of: client) ?? ""
                let result = try client.login(email: email, password: password, guestSession: guest, idempotencyKey: newKey())
                try ClientSettings.update(at: ctx.settingsPath) { $0.sessions[client.socketPath] = result.session }
                ctx.print(.login(result), human: HumanOutput.login(result))
            }
        })

    static let logout = Subcommand(
        name: "logout",
        abstract: "Ends the login saved for this groserd (the session is revoked at once) and forgets it.",
        validate: { parsed throws(UsageError) in
            return { ctx in
                let client = ctx.client()
                guard let session = try ctx.savedSession(of: client) else {
                    throw GroserError.server(Status(.failedPrecondition, "There is no saved session for this groserd: nothing to log out of."))
                }
                try client.logout(session: session)
                try ClientSettings.update(at: ctx.settingsPath) { $0.sessions[client.socketPath] = nil }
                ctx.print(.logout, human: "Logged out.\n")
            }
        })

    static let whoami = Subcommand(
        name: "whoami",
        abstract: "Shows the account the session saved for this groserd is logged in to.",
        validate: { parsed throws(UsageError) in
            return { ctx in
                let client = ctx.client()
                guard let session = try ctx.savedSession(of: client) else {
                    ctx.print(.whoAmI(Identity(account: nil, sessionCreatedAtUnix: 0)), human: "Not logged in (no session saved for this groserd).\n")
                    return
                }
                let identity = try client.whoAmI(session: session)
                ctx.print(.whoAmI(identity),
                          human: identity.account.map { "\($0.name) <\($0.email)>\n" } ?? "Not logged in (an anonymous session).\n")
            }
        })

    private static func passwordSource(_ parsed: ParsedArguments) throws(UsageError) -> Bool {
        let fromStdin = parsed.flags.contains("--password-stdin")
        if !fromStdin && !Terminal.inputIsTerminal {
            throw UsageError("no terminal to ask for the password on; pipe it with --password-stdin")
        }
        return fromStdin
    }

    private static func readPassword(fromStdin: Bool, confirm: Bool) throws -> String {
        if fromStdin {
            guard let line = Terminal.readLine(), !line.isEmpty else { throw UsageError("no password on standard input") }
            return line
        }
        guard let first = Terminal.readSecret(prompt: "Password: ") else { throw Cancelled() }
        if confirm {
            guard let again = Terminal.readSecret(prompt: "Password again: ") else { throw Cancelled() }
            guard again == first else { throw UsageError("the two passwords differ") }
        }
        return first
    }
}

extension HumanOutput {
    static func login(_ r: LoginResult) -> TerminalText {
        var text: TerminalText = "Logged in as \(r.account.name) <\(r.account.email)>.\n"
        for m in r.merged {
            text = text + "Merged the guest cart at \(m.storeUID) (cart version \(m.version)):\n"
            for l in m.lines {
                var line: String
                if l.notAdded {
                    line = "  \(l.productUID): not added, the cart already has \(r.cartLineMaximum) lines"
                } else if l.summed {
                    line = "  \(l.productUID): +\(l.guestQuantity), now \(l.quantity)"
                } else {
                    line = "  \(l.productUID): added \(l.quantity)"
                }
                if l.droppedUnits > 0 && !l.notAdded {
                    line += " (capped at \(r.quantityMaximum); \(l.droppedUnits) not added)"
                }
                text = text + "\(line)\n"
            }
        }
        if r.merged.isEmpty { text = text + "No guest cart to merge.\n" }
        return text
    }
}
