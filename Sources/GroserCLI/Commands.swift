import GroserClient
import GroserSystem

/// Options every subcommand takes.
struct GlobalOptions {
    /// The socket named with --socket; nil for $GROSER_SOCKET or the
    /// per-user default (whose directory the client checks first).
    var socketPath: String?
    var timeout = 10.0
    var json = false
    /// With --json, also the fields that hold their default.
    var emitDefaults = false

    static let specs = [
        OptionSpec(name: "--socket", valueName: "PATH", help: "groserd's socket (default: $GROSER_SOCKET, else the per-user default)"),
        OptionSpec(name: "--timeout", valueName: "SECONDS", help: "give up on a call after this long (default: 10)"),
        OptionSpec(name: "--json", valueName: nil, help: "print Protobuf's canonical JSON mapping of the answer"),
        OptionSpec(name: "--emit-defaults", valueName: nil, help: "with --json (and in call), also print fields that hold their default"),
        OptionSpec(name: "--help", valueName: nil, help: "show help"),
    ]

    init(_ parsed: ParsedArguments, help: String) throws(UsageError) {
        if let s = parsed.values["--socket"] { socketPath = s }
        if let t = parsed.values["--timeout"] {
            guard let v = Double(t), v > 0, v <= 86_400 else {
                throw UsageError("--timeout must be a number of seconds above 0, not \"\(t)\"", help: help)
            }
            timeout = v
        }
        json = parsed.flags.contains("--json")
        emitDefaults = parsed.flags.contains("--emit-defaults")
    }
}

/// Where a command writes, and with what it talks to the server.
struct Context {
    var options: GlobalOptions
    var settingsPath: String
    var out: (String) -> Void

    func client() -> GroserClient {
        if let path = options.socketPath { return GroserClient(socketPath: path, timeout: options.timeout) }
        return GroserClient(timeout: options.timeout)
    }

    /// The session saved for `client`'s daemon. A legacy `session=` line
    /// stands in for the default socket, however it was named.
    func savedSession(_ settings: ClientSettings, _ client: GroserClient) -> String? {
        settings.session(for: client.socketPath, isDefaultSocket: client.socketPath == GroserClient.defaultSocketPath())
    }

    /// The store --city or --store names, else the saved city's default store.
    func storeSelector(city: String?, store: String?) throws -> StoreSelector {
        if let city { return .cityCode(city) }
        if let store { return .storeUID(store) }
        guard let code = try ClientSettings.load(from: settingsPath).cityCode else {
            throw UsageError("no city given and none saved; use --city CODE or first groser-client set-city CODE")
        }
        return .cityCode(code)
    }

    /// Writes an answer: with --json, Protobuf's canonical JSON mapping of
    /// the response body the answer came in (read back through the
    /// descriptors compiled in), else text for people (whose server strings
    /// `TerminalText` has escaped).
    func print(_ body: @autoclosure () -> ResponseBody, human: @autoclosure () -> TerminalText) {
        out(options.json ? ProtoJSON.json(body(), emitDefaults: options.emitDefaults).rendered() + "\n" : human().text)
    }

    /// The same for an answer that is one message of the protocol but no
    /// method's whole response body.
    func print(message: @autoclosure () throws -> ProtoMessage, human: @autoclosure () -> TerminalText) rethrows {
        out(options.json ? ProtoJSON.json(try message(), emitDefaults: options.emitDefaults).rendered() + "\n" : human().text)
    }
}

/// A subcommand: its name, help, options, and what it does.
struct Subcommand: Sendable {
    var name: String
    var usage: String
    var abstract: String
    var options: [OptionSpec] = []
    var positionals: [(String, String)] = []
    /// Prints JSON whether or not --json is given (`call`): errors too.
    var alwaysJSON = false
    /// Checks the parsed words and returns the action, before anything runs.
    var validate: @Sendable (ParsedArguments, String) throws(UsageError) -> (Context) throws -> Void

    var help: String {
        var text = "usage: groser-client \(usage)\n\n\(abstract)\n"
        if !positionals.isEmpty {
            text += "\narguments:\n"
            for (name, help) in positionals { text += "  " + pad(name) + help + "\n" }
        }
        text += "\noptions:\n"
        for spec in options + GlobalOptions.specs {
            text += "  " + pad(spec.name + (spec.valueName.map { " " + $0 } ?? "")) + spec.help + "\n"
        }
        return text
    }

    private func pad(_ s: String) -> String { s.count >= 22 ? s + "  " : s + String(repeating: " ", count: 24 - s.count) }
}

enum Commands {
    static let all: [Subcommand] = [cities, getStore, shelf, search, setCity, info, watch, stats, cart, checkout, orders, register, login, logout,
                                    whoami, admin, list, describe, call]

    static let cities = Subcommand(
        name: "cities", usage: "cities [--json]",
        abstract: "Lists the cities groser delivers to, with their stores and default store.",
        validate: { (parsed, help) throws(UsageError) in
            try noPositionals(parsed, help)
            return { (ctx) throws in
                let list = try ctx.client().listCities()
                ctx.print(.listCities(list), human: HumanOutput.cities(list))
            }
        })

    static let getStore = Subcommand(
        name: "get-store", usage: "get-store [--city CODE | --store UID] [--products] [--json]",
        abstract: """
        Shows a store's departments and shelves; a city means its default store.
        Without --city or --store, the city saved by set-city is used.
        """,
        options: [
            OptionSpec(name: "--city", valueName: "CODE", help: "a city code, e.g. SPB"),
            OptionSpec(name: "--store", valueName: "UID", help: "a store uid, e.g. store-spb-2"),
            OptionSpec(name: "--products", valueName: nil, help: "list every shelf's products"),
        ],
        validate: { (parsed, help) throws(UsageError) in
            try noPositionals(parsed, help)
            let city = parsed.values["--city"]
            let store = parsed.values["--store"]
            if city != nil && store != nil { throw UsageError("give --city or --store, not both", help: help) }
            if city?.isEmpty == true || store?.isEmpty == true { throw UsageError("--city and --store need a non-empty value", help: help) }
            let products = parsed.flags.contains("--products")
            return { (ctx) throws in
                let selector = try ctx.storeSelector(city: city, store: store)
                let v = products ? try ctx.client().storeWithProducts(selector) : try ctx.client().store(selector)
                ctx.print(.getStore(v), human: HumanOutput.store(v, includeProducts: products))
            }
        })

    static let shelf = Subcommand(
        name: "shelf", usage: "shelf UID [--json]",
        abstract: "Shows one shelf's products, sorted by name.",
        positionals: [("UID", "the shelf's uid, as get-store prints it")],
        validate: { (parsed, help) throws(UsageError) in
            guard parsed.positionals.count == 1, let uid = parsed.positionals.first, !uid.isEmpty else {
                throw UsageError("shelf needs exactly one shelf uid", help: help)
            }
            return { (ctx) throws in
                let v = try ctx.client().shelf(uid)
                ctx.print(.getShelf(v), human: HumanOutput.shelf(v))
            }
        })

    static let setCity = Subcommand(
        name: "set-city", usage: "set-city CODE [--json]",
        abstract: "Checks the city with groserd and saves it; get-store without --city then uses it.",
        positionals: [("CODE", "a city code, e.g. SPB")],
        validate: { (parsed, help) throws(UsageError) in
            guard parsed.positionals.count == 1, let code = parsed.positionals.first, !code.isEmpty else {
                throw UsageError("set-city needs exactly one city code", help: help)
            }
            return { (ctx) throws in
                let list = try ctx.client().listCities()
                guard let city = list.cities.first(where: { $0.code.uppercased() == code.uppercased() }) else {
                    let codes = list.cities.map(\.code).joined(separator: ", ")
                    throw GroserError.server(Status(.notFound, "No city has the code \"\(code)\"; the cities are \(codes)."))
                }
                try ClientSettings.update(at: ctx.settingsPath) { $0.cityCode = city.code }
                // The City message as groserd gave it; where it was saved is
                // no field of it, so only the text says.
                try ctx.print(message: try ProtoMessage.decode(BodyEncoder.city(city), as: "groser.v1.City"),
                          human: "City set to \(city.name) (\(city.code)); saved in \(ctx.settingsPath)\n")
            }
        })

    static let info = Subcommand(
        name: "info", usage: "info [--json]",
        abstract: "Shows the server's version, protocol, uptime, catalog version and methods.",
        validate: { (parsed, help) throws(UsageError) in
            try noPositionals(parsed, help)
            return { (ctx) throws in
                let client = ctx.client()
                let v = try client.serverInfo()
                ctx.print(.serverInfo(v), human: HumanOutput.info(v, socket: client.socketPath))
            }
        })

    private static func noPositionals(_ parsed: ParsedArguments, _ help: String) throws(UsageError) {
        if let extra = parsed.positionals.first { throw UsageError("unexpected argument \"\(extra)\"", help: help) }
    }
}
