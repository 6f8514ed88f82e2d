import GroserClient
import GroserCommandLine
import GroserSystem

/// Options every command takes, before or after its name.
struct GlobalOptions {
    /// The socket named with --socket; nil for $GROSER_SOCKET or the
    /// per-user default (whose directory the client checks first).
    var socketPath: String?
    var timeout = 10.0
    var json = false
    /// With --json, also the fields that hold their default.
    var emitDefaults = false
    /// -v: each call's socket, request id, deadline and time on stderr.
    var verbose = false
    /// --expect-server-uid, else $GROSER_SERVER_UID: a uid besides this
    /// user's and root's whose groserd the client talks to.
    var expectedServerUID: UInt32?

    static let specs = [
        OptionSpec(name: "--socket", valueName: "PATH", help: "groserd's socket", defaultValue: "$GROSER_SOCKET, else the per-user default",
                   takesFile: true),
        OptionSpec(name: "--timeout", valueName: "SECONDS", help: "give up on a call after this long, at least 0.001 (1 ms); exit 68",
                   defaultValue: "10"),
        OptionSpec(name: "--json", help: "print Protobuf's canonical JSON mapping of the answer, and errors as {\"code\": ..., \"message\": ...}"),
        OptionSpec(name: "--emit-defaults", help: "with --json (and in call), also print fields that hold their default"),
        OptionSpec(name: "--expect-server-uid", valueName: "UID|NAME",
                   help: "also talk to a groserd run by this user (the client refuses, before sending anything, a server run by anyone but this user, root or this uid)",
                   defaultValue: "$GROSER_SERVER_UID, else none"),
        OptionSpec(name: "--verbose", shortName: "v", help: "on standard error: the socket, each request's id, the deadline sent and the time taken"),
    ]

    init(_ parsed: ParsedArguments) throws(UsageError) {
        if let s = parsed.values["--socket"] {
            guard !s.isEmpty else { throw UsageError("--socket needs a non-empty path") }
            guard s.utf8.count <= 107 || s.hasPrefix("@") else {
                throw UsageError("--socket: a socket path holds at most 107 bytes, this one \(s.utf8.count)")
            }
            socketPath = s
        }
        if let t = parsed.values["--timeout"] {
            // Deadlines go to groserd in whole milliseconds, and 0 there
            // means none: a shorter timeout cannot be sent as asked.
            guard let v = Double(t), v.isFinite, v >= 0.001, v <= 86_400 else {
                throw UsageError("--timeout must be a number of seconds from 0.001 (1 ms) to 86400, not \"\(t)\"")
            }
            timeout = v
        }
        if let named = parsed.values["--expect-server-uid"] ?? ProcessInfo.environment("GROSER_SERVER_UID") {
            let source = parsed.values["--expect-server-uid"] == nil ? "GROSER_SERVER_UID" : "--expect-server-uid"
            guard let uid = Accounts.userID(named) else { throw UsageError("\(source): no user is called \"\(named)\"") }
            expectedServerUID = uid
        }
        json = parsed.flags.contains("--json")
        emitDefaults = parsed.flags.contains("--emit-defaults")
        verbose = parsed.flags.contains("--verbose")
    }
}

/// Where a command writes, and with what it talks to the server.
struct Context {
    var options: GlobalOptions
    var settingsPath: String
    var out: (String) -> Void
    var output: Output

    /// True once standard output failed: loops stop writing.
    var outputFailed: Bool { output.failure != nil }

    func client() -> GroserClient {
        let trace: (@Sendable (CallTrace) -> Void)? = options.verbose ? { @Sendable t in Context.printTrace(t) } : nil
        var location = options.socketPath.map { SocketLocation(path: $0, isExplicit: true) } ?? .fromEnvironment()
        location.expectedServerUID = options.expectedServerUID
        return GroserClient(location: location, timeout: options.timeout, trace: trace)
    }

    /// One -v line per call, like curl -v's: on stderr, never mixed into the answer.
    static func printTrace(_ t: CallTrace) {
        var line = "groser-client: \(t.socketPath): request \(t.requestID)"
        line += t.deadlineMilliseconds == 0 ? ", no deadline (a stream)" : ", deadline \(t.deadlineMilliseconds) ms"
        if let ns = t.elapsedNanoseconds {
            let micros = ns / 1000
            line += ", \(micros / 1000).\(String(repeating: "0", count: 3 - String(micros % 1000).count))\(micros % 1000) ms"
        }
        switch t.outcome {
        case .success(let status): line += t.elapsedNanoseconds == nil ? ": opened" : ": \(status.code)"
        case .failure(let error): line += ": \(error)"
        }
        StandardStreams.err(Terminal.safe(line) + "\n")
    }

    /// The session saved for `client`'s daemon. A legacy `session=` line
    /// stands in for the default socket, however it was named.
    func savedSession(_ settings: ClientSettings, _ client: GroserClient) -> String? {
        settings.session(for: client.socketPath, isDefaultSocket: client.socketPath == GroserClient.defaultSocketPath())
    }

    /// The session saved for `client`'s daemon, from the settings file.
    func savedSession(of client: GroserClient) throws -> String? {
        savedSession(try ClientSettings.load(from: settingsPath), client)
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

    /// `print` for a command that lists things: with `-o`, the list found
    /// at `path` in the answer's JSON, in that format; else as `print`.
    func printList(_ body: @autoclosure () -> ResponseBody, path: [String], format: ListFormat?,
                   human: @autoclosure () -> TerminalText) {
        guard let format else { return print(body(), human: human()) }
        out(format.render(ProtoJSON.json(body(), emitDefaults: format == .tsv || options.emitDefaults), path: path))
    }

    /// The same for an answer that is one message of the protocol but no
    /// method's whole response body.
    func print(message: @autoclosure () throws -> ProtoMessage, human: @autoclosure () -> TerminalText) rethrows {
        out(options.json ? ProtoJSON.json(try message(), emitDefaults: options.emitDefaults).rendered() + "\n" : human().text)
    }
}

/// `-o`: a list as a JSON array, JSON lines, or tab-separated values with
/// a header, each element as Protobuf's JSON mapping writes it.
enum ListFormat: String, CaseIterable {
    case json, jsonl, tsv

    static let option = OptionSpec(name: "--output", shortName: "o", valueName: "FORMAT",
                                   help: "print the list as a JSON array, JSON lines, or tab-separated values with a header row",
                                   choices: allCases.map(\.rawValue))

    /// The format -o names, if given (the parser has checked the choice).
    init?(_ parsed: ParsedArguments) {
        guard let text = parsed.values["--output"] else { return nil }
        self.init(rawValue: text)
    }

    func render(_ answer: JSON, path: [String]) -> String {
        var list = answer
        for key in path {
            guard case .object(let members) = list, let next = members.first(where: { $0.0 == key })?.1 else { list = .array([]); break }
            list = next
        }
        guard case .array(let items) = list else { return self == .json ? "[]\n" : "" }
        switch self {
        case .json: return JSON.array(items).rendered() + "\n"
        case .jsonl: return items.map { $0.compact() + "\n" }.joined()
        case .tsv:
            // Nested messages flatten to dotted columns (price.minorUnits);
            // lists stay JSON in their cell.
            let rows = items.map { Self.flatten($0, prefix: "") }
            var columns: [String] = []
            for row in rows { for (key, _) in row where !columns.contains(key) { columns.append(key) } }
            var text = columns.joined(separator: "\t") + "\n"
            for row in rows {
                text += columns.map { c in Self.cell(row.first { $0.0 == c }?.1 ?? "") }.joined(separator: "\t") + "\n"
            }
            return text
        }
    }

    private static func flatten(_ value: JSON, prefix: String) -> [(String, String)] {
        switch value {
        case .object(let members):
            return members.flatMap { flatten($0.1, prefix: prefix.isEmpty ? $0.0 : prefix + "." + $0.0) }
        case .string(let s): return [(prefix, s)]
        case .number(let n): return [(prefix, n)]
        case .bool(let b): return [(prefix, b ? "true" : "false")]
        case .null: return [(prefix, "")]
        case .array: return [(prefix, value.compact())]
        }
    }

    /// A tab, newline or backslash in a value would break the row: escaped.
    private static func cell(_ s: String) -> String {
        guard s.contains(where: { $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\\" }) else { return s }
        return s.escaping(["\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"])
    }
}

enum Commands {
    static let all: [Subcommand] = [cities, stores, getStore, shelf, products, search, setCity, info, latency, watch, stats, cart, checkout, orders,
                                    register, login, logout, whoami, admin, list, describe, call]

    /// Commands that print JSON whether or not --json is given: errors too.
    static let alwaysJSON: Set<String> = ["call"]

    static let storeSelection = [
        OptionSpec(name: "--city", valueName: "CODE", help: "a city code, e.g. SPB: its default store"),
        OptionSpec(name: "--store", valueName: "UID", help: "a store uid, e.g. store-spb-2"),
    ]

    /// --city and --store, checked: at most one, neither empty.
    static func storeChoice(_ parsed: ParsedArguments) throws(UsageError) -> (city: String?, store: String?) {
        let city = parsed.values["--city"]
        let store = parsed.values["--store"]
        if city != nil && store != nil { throw UsageError("give --city or --store, not both") }
        if city?.isEmpty == true || store?.isEmpty == true { throw UsageError("--city and --store need a non-empty value") }
        return (city, store)
    }

    static let cities = Subcommand(
        name: "cities",
        abstract: "Lists the cities groser delivers to, with their stores and default store.",
        options: [ListFormat.option],
        validate: { parsed throws(UsageError) in
            let format = ListFormat(parsed)
            return { ctx in
                let list = try ctx.client().listCities()
                ctx.printList(.listCities(list), path: ["cities"], format: format, human: HumanOutput.cities(list))
            }
        })

    static let stores = Subcommand(
        name: "stores",
        abstract: "Lists a city's stores: uid, name, address, whether it is the default, and its version.",
        discussion: "Without --city, the city saved by set-city is used.",
        options: [OptionSpec(name: "--city", valueName: "CODE", help: "a city code, e.g. SPB"), ListFormat.option],
        validate: { parsed throws(UsageError) in
            let city = parsed.values["--city"]
            if city?.isEmpty == true { throw UsageError("--city needs a non-empty value") }
            let format = ListFormat(parsed)
            return { ctx in
                guard case .cityCode(let code) = try ctx.storeSelector(city: city, store: nil) else { return }
                let list = try ctx.client().stores(of: .code(code))
                ctx.printList(.listStores(list), path: ["stores"], format: format, human: HumanOutput.stores(list))
            }
        })

    static let getStore = Subcommand(
        name: "get-store",
        abstract: "Shows a store's departments and shelves; a city means its default store.",
        discussion: "Without --city or --store, the city saved by set-city is used.",
        options: storeSelection + [OptionSpec(name: "--products", help: "list every shelf's products")],
        validate: { parsed throws(UsageError) in
            let (city, store) = try storeChoice(parsed)
            let products = parsed.flags.contains("--products")
            return { ctx in
                let selector = try ctx.storeSelector(city: city, store: store)
                let v = products ? try ctx.client().storeWithProducts(selector) : try ctx.client().store(selector)
                ctx.print(.getStore(v), human: HumanOutput.store(v, includeProducts: products))
            }
        })

    static let shelf = Subcommand(
        name: "shelf",
        abstract: "Shows one shelf's products, sorted by name.",
        options: [ListFormat.option],
        arguments: [ArgumentSpec("UID", "the shelf's uid, as get-store prints it")],
        validate: { parsed throws(UsageError) in
            let uid = parsed.positionals[0]
            guard !uid.isEmpty else { throw UsageError("the shelf uid is empty") }
            let format = ListFormat(parsed)
            return { ctx in
                let v = try ctx.client().shelf(uid)
                ctx.printList(.getShelf(v), path: ["shelf", "products"], format: format, human: HumanOutput.shelf(v))
            }
        })

    static let setCity = Subcommand(
        name: "set-city",
        abstract: "Checks the city with groserd and saves it; get-store without --city then uses it.",
        arguments: [ArgumentSpec("CODE", "a city code, e.g. SPB")],
        exitCodes: [ExitCodeSpec(69, "no city has that code (NOT_FOUND); the saved city is left as it was")],
        validate: { parsed throws(UsageError) in
            let code = parsed.positionals[0]
            guard !code.isEmpty else { throw UsageError("the city code is empty") }
            return { ctx in
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
        name: "info",
        abstract: "Shows the server's version, protocol, uptime, catalog version and methods.",
        validate: { _ throws(UsageError) in
            return { ctx in
                let client = ctx.client()
                let v = try client.serverInfo()
                ctx.print(.serverInfo(v), human: HumanOutput.info(v, socket: client.socketPath))
            }
        })
}
