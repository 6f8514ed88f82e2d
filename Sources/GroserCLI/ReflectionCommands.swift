import GroserClient
import GroserCommandLine
import GroserSystem

/// grpcurl's and varlinkctl's verbs: the methods, the messages, and a call of
/// any method with a request written as JSON. Everything here comes from the
/// method table and the protobuf-c descriptors compiled in, not from a list
/// of its own, so a method added to the table and the .proto files is
/// listed, described and callable with no change here.
extension Commands {
    static let list = Subcommand(
        name: "list",
        abstract: "Lists every method with its request and response messages, one a line.",
        validate: { parsed throws(UsageError) in
            return { ctx in
                if ctx.options.json {
                    let methods = MethodTable.all.map { m in
                        JSON.object([("method", .string(m.name)),
                                     ("request", .string(ProtoSchema.requestMessage(for: m.field).fullName)),
                                     ("response", .string(ProtoSchema.responseMessage(for: m.field).fullName)),
                                     ("streams", .bool(m.streams))])
                    }
                    ctx.out(JSON.array(methods).rendered() + "\n")
                    return
                }
                let width = (MethodTable.all.map(\.name.count).max() ?? 0) + 2
                let requestWidth = (MethodTable.all.map { ProtoSchema.requestMessage(for: $0.field).fullName.count }.max() ?? 0) + 2
                var text = ""
                for m in MethodTable.all {
                    let request = ProtoSchema.requestMessage(for: m.field).fullName
                    text += pad(m.name, width) + pad(request, requestWidth) + ProtoSchema.responseMessage(for: m.field).fullName
                    text += m.streams ? " (stream)\n" : "\n"
                }
                ctx.out(text)
            }
        })

    static let describe = Subcommand(
        name: "describe",
        abstract: "Describes a method or a message, from the descriptors compiled in.",
        discussion: """
        A method: its request and response messages, who may call it, whether a resend is safe, and its \
        request's fields. A message: each field's type, name, number, repeated or oneof, and the JSON name \
        call -d takes.
        """,
        arguments: [ArgumentSpec("METHOD|MESSAGE", "a method as list names it (GetStore), or a message (GetStoreRequest, groser.v1.City)")],
        validate: { parsed throws(UsageError) in
            let name = parsed.positionals[0]
            guard !name.isEmpty else { throw UsageError("the method or message name is empty") }
            let trimmed = name.hasPrefix(".") ? String(name.dropFirst()) : name
            let text: String
            if let method = method(named: trimmed) {
                text = describe(method)
            } else if let message = ProtoSchema.message(named: trimmed) {
                text = "\(message.fullName) is a message:\n" + describe(message)
            } else if let e = ProtoSchema.enumeration(named: trimmed) ?? ProtoSchema.enumeration(named: "groser.v1." + trimmed) {
                text = "\(e.fullName) is an enum:\nenum \(e.fullName.split(separator: ".").last ?? "") {\n"
                    + e.values.map { "  \($0.name) = \($0.number);\n" }.joined() + "}\n"
            } else {
                throw UsageError("no method, message or enum is named \"\(name)\"; groser-client list names the methods")
            }
            return { ctx in ctx.out(text) }
        })

    static let call = Subcommand(
        name: "call",
        abstract: "Sends any method's request, written as JSON, and prints the answer's body as JSON.",
        discussion: """
        The request is Protobuf's JSON mapping of the method's request message (describe shows the fields; \
        lowerCamelCase or .proto names, 64-bit integers as strings or numbers, enums by name or number). A refusal \
        prints {"code": ..., "message": ...} on stdout and exits 64 + code; so does every other error, as with \
        --json. A streaming method (Watch) prints each frame as one JSON line until the stream ends, --count \
        frames came, or Ctrl-C. Sessions are not opened or saved for you: pass them.
        """,
        options: [
            OptionSpec(name: "-d", valueName: "JSON", help: "the request: JSON text, @FILE to read it from a file, - from standard input",
                       defaultValue: "{}"),
            OptionSpec(name: "--count", valueName: "N", help: "streaming methods: stop after N frames"),
        ],
        arguments: [ArgumentSpec("METHOD", "a method as list names it, e.g. GetStore")],
        validate: { parsed throws(UsageError) in
            let name = parsed.positionals[0]
            guard let method = method(named: name) else {
                throw UsageError("no method is named \"\(name)\"; groser-client list names them")
            }
            var count: Int?
            if let c = parsed.values["--count"] {
                guard let v = Int(c), v > 0 else { throw UsageError("--count must be a whole number above 0, not \"\(c)\"") }
                count = v
            }
            let data = parsed.values["-d"] ?? "{}"
            // The request is read before anything is sent: a mistake in it
            // is a usage error (exit 2), never half a call.
            let text = try requestText(data)
            let json: JSON
            do {
                json = try JSON.parse(text)
            } catch {
                throw UsageError("-d is not JSON: \(error)")
            }
            let type = ProtoSchema.requestMessage(for: method.field)
            let body: ProtoMessage
            do {
                body = try ProtoJSON.message(from: json, type: type.fullName)
            } catch {
                throw UsageError("-d does not fit \(type.fullName): \(error)")
            }
            return { ctx in
                let client = ctx.client()
                if method.streams {
                    var printed = 0
                    var refusal: Status?
                    try client.callStreaming(method.field, body: body) { answer in
                        guard answer.status.isOK else {
                            refusal = answer.status
                            return false
                        }
                        ctx.out(ProtoJSON.json(answer.body ?? ProtoMessage(ProtoSchema.responseMessage(for: method.field).fullName),
                                               emitDefaults: ctx.options.emitDefaults).compact() + "\n")
                        printed += 1
                        return !ctx.outputFailed && (count.map { printed < $0 } ?? true)
                    }
                    if let refusal { throw GroserError.server(refusal) }
                    return
                }
                let answer = try client.call(method.field, body: body)
                guard answer.status.isOK else { throw GroserError.server(answer.status) }
                let message = answer.body ?? ProtoMessage(ProtoSchema.responseMessage(for: method.field).fullName)
                ctx.out(ProtoJSON.json(message, emitDefaults: ctx.options.emitDefaults).rendered() + "\n")
            }
        })

    /// The method `name` names, as the table spells it or in any case.
    private static func method(named name: String) -> MethodInfo? {
        MethodTable.named(name) ?? MethodTable.all.first { $0.name.lowercased() == name.lowercased() }
    }

    /// The JSON text -d gives: itself, a file's contents (@FILE) or standard input (-).
    private static func requestText(_ data: String) throws(UsageError) -> String {
        let path: String
        if data == "-" {
            path = "/dev/stdin"
        } else if data.hasPrefix("@") {
            path = String(data.dropFirst())
        } else {
            return data
        }
        let bytes: [UInt8]?
        do { bytes = try Files.read(path) } catch { throw UsageError("-d: cannot read \(path): \(error)") }
        guard let bytes else { throw UsageError("-d: no file \(path)") }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func describe(_ m: MethodInfo) -> String {
        let request = ProtoSchema.requestMessage(for: m.field)
        let response = ProtoSchema.responseMessage(for: m.field)
        var text = "\(m.name) is a method:\n"
        text += "rpc \(m.name) ( \(request.fullName) ) returns ( \(m.streams ? "stream " : "")\(response.fullName) );\n"
        text += "// access: \(m.access), resending: \(m.retry), field \(m.field.rawValue) of Request.method and Response.body\n\n"
        text += "\(request.fullName) is a message:\n" + describe(request)
        return text
    }

    /// A message as a .proto file would declare it, members of a oneof
    /// together. protobuf-c keeps no oneof names, so they are numbered.
    private static func describe(_ message: ProtoMessageInfo) -> String {
        var text = "message \(message.shortName) {\n"
        var shownOneofs: Set<Int> = []
        func line(_ f: ProtoFieldInfo, _ indent: String) -> String {
            let label = f.isRepeated ? "repeated " : ""
            let comment = f.jsonName == f.name ? "" : "  // JSON: \(f.jsonName)"
            return "\(indent)\(label)\(f.type.protoName) \(f.name) = \(f.number);\(comment)\n"
        }
        for f in message.fields {
            if let o = f.oneofIndex {
                guard shownOneofs.insert(o).inserted else { continue }
                text += "  oneof #\(o + 1) {\n"
                for member in message.fields where member.oneofIndex == o { text += line(member, "    ") }
                text += "  }\n"
            } else {
                text += line(f, "  ")
            }
        }
        return text + "}\n"
    }

    private static func pad(_ s: String, _ width: Int) -> String {
        s + String(repeating: " ", count: max(1, width - s.count))
    }
}
