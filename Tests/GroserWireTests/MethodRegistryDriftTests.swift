import Foundation
import GroserWire
import Testing

/// The files that repeat the method registry's facts (MethodRegistry.swift),
/// read from the repository and held to it: a method added, renamed or
/// renumbered in one and not the other fails here, naming what differs.
/// (The fuzz seeds and dictionary are checked in GroserFuzzTests, FieldLimits
/// in GroserServerTests.)
@Suite("the method registry and the files that repeat it")
struct MethodRegistryDriftTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static func text(_ path: String) throws -> String {
        try String(contentsOfFile: root + "/" + path, encoding: .utf8)
    }

    /// The fields of `oneof <name> { ... }` in `message <message> { ... }`
    /// of a .proto text: (number, field name, type).
    static func oneofFields(_ proto: String, message: String, oneof: String) -> [(UInt32, String, String)] {
        guard let start = proto.range(of: "message \(message) {"),
              let open = proto.range(of: "oneof \(oneof) {", range: start.upperBound..<proto.endIndex),
              let close = proto.range(of: "}", range: open.upperBound..<proto.endIndex) else { return [] }
        return proto[open.upperBound..<close.lowerBound].split(separator: "\n").compactMap { line in
            let words = line.split(separator: "//")[0].split(whereSeparator: { " =;\t".contains($0) })
            guard words.count == 3, let n = UInt32(words[2]) else { return nil }
            return (n, String(words[1]), String(words[0]))
        }
    }

    @Test func theProtosEnvelopesHaveOneFieldPerMethodAsTheRegistrySays() throws {
        let proto = try Self.text("Protos/groser/v1/service.proto")
        let requests = Self.oneofFields(proto, message: "Request", oneof: "method")
        let responses = Self.oneofFields(proto, message: "Response", oneof: "body")
        #expect(requests.map(\.0) == MethodTable.all.map(\.field.rawValue), "Request.method's field numbers")
        #expect(responses.map(\.0) == MethodTable.all.map(\.field.rawValue), "Response.body's field numbers")
        for (info, (request, response)) in zip(MethodTable.all, zip(requests, responses)) {
            #expect(request.1 == info.oneofField && response.1 == info.oneofField, "\(info.name)'s oneof field")
            #expect(request.2 == info.requestMessage, "\(info.name)'s request message")
            #expect(response.2 == info.responseMessage, "\(info.name)'s response message")
            // The descriptors compiled into groserd say the same.
            #expect(ProtoSchema.requestMessage(for: info.field).fullName == "groser.v1." + info.requestMessage)
            #expect(ProtoSchema.responseMessage(for: info.field).fullName == "groser.v1." + info.responseMessage)
        }
    }

    /// PROTOCOL.md §2's table: `| field | method | oneof field | who | resend | answered by | § |`.
    @Test func protocolMdsMethodTableHasOneRowPerMethodAsTheRegistrySays() throws {
        let doc = try Self.text("docs/PROTOCOL.md")
        let rows = doc.split(separator: "\n").map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
            .filter { $0.count == 7 && UInt32($0[0]) != nil }
        #expect(rows.map { UInt32($0[0])! } == MethodTable.all.map(\.field.rawValue), "PROTOCOL.md's method table's fields")
        for (info, row) in zip(MethodTable.all, rows) {
            #expect(row[1] == info.name && row[2] == "`\(info.oneofField)`", "\(row)")
            let access = switch info.access {
            case .anyone: row[3].hasPrefix("anyone")
            case .session: row[3] == "the session's holder"
            case .operators: row[3] == "operators"
            }
            #expect(access, "\(info.name)'s caller is \(info.access), the table says \(row[3])")
            let retry = switch info.retry {
            case .safe: row[4].hasPrefix("safe")
            case .withIdempotencyKey: row[4] == "with the same `idempotency_key`"
            case .unsafe: !row[4].hasPrefix("safe") && !row[4].contains("idempotency_key")
            }
            #expect(retry, "\(info.name)'s resend is \(info.retry), the table says \(row[4])")
            let executor = switch info.executor {
            case .catalogReader: "loop (catalog)"
            case .eventLoop: "loop"
            case .customerShard: "customer shard"
            case .accountWorkers: "account workers"
            case .commitQueue: "commit queue"
            case .importThread: "import thread"
            }
            #expect(row[5] == executor, "\(info.name) is answered by \(info.executor), the table says \(row[5])")
        }
    }

    /// The Python client reads its methods from the compiled .protos (which
    /// the test above holds to the registry) instead of listing them.
    @Test func thePythonClientListsNoMethodsOfItsOwn() throws {
        for file in ["tools/python/groser_client.py", "tools/python/test_groser_client.py"] {
            let source = try Self.text(file)
            #expect(source.contains("oneofs_by_name[\"method\"]"), "\(file) should read the methods from the .protos")
            for info in MethodTable.all where info.oneofField.contains("_") {
                #expect(!source.contains("\"\(info.oneofField)\", \"") && !source.contains("\"\(info.name)\", \""),
                        "\(file) lists methods by hand (\(info.name))")
            }
        }
    }

    /// Every method with a client wrapper has it in Sources/GroserClient, sync
    /// (`throws`, no `async`) and async, by the name the registry gives.
    @Test func theClientHasASyncAndAnAsyncWrapperOfEveryMethod() throws {
        let dir = Self.root + "/Sources/GroserClient"
        let sources = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOfFile: dir + "/" + $0, encoding: .utf8) }.joined(separator: "\n")
        // Each public function's declaration up to its body.
        let declarations = sources.components(separatedBy: "public func ").dropFirst().map { $0.prefix { $0 != "{" } }
        for info in MethodTable.all {
            guard let name = info.clientWrapper else { continue }
            let forms = declarations.filter { $0.hasPrefix(name + "(") }
            #expect(forms.contains { !$0.contains("async") && !$0.contains("AsyncThrowingStream") },
                    "GroserClient has no sync \(name)(…) for \(info.name)")
            if info.clientAsync {
                #expect(forms.contains { $0.contains("async") || $0.contains("AsyncThrowingStream") },
                        "GroserClient has no async \(name)(…) for \(info.name)")
            }
        }
    }
}
