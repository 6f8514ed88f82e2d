import Foundation
import GroserClient
import GroserSystem
import Testing

/// A catalog whose names hold terminal control sequences (kubectl's
/// CVE-2021-25743): groser-client prints them escaped, in human output,
/// in error messages and in --json, through the real binaries.
@Suite("server strings cannot command the terminal", .serialized)
struct TerminalOutputTests {
    /// Red text, a window title (OSC ... BEL), a tab, DEL, a C1 CSI, a line
    /// feed, a right-to-left override (the line's tail would show reversed),
    /// a left-to-right isolate with its end, a zero-width space and a line
    /// separator.
    static let evil = "Evil\u{1B}[31mRed\u{1B}]0;pwned\u{07}\ttab\u{7F}del\u{9B}csi\nline"
        + "\u{202E}rlo\u{2066}lri\u{2069}\u{200B}zw\u{2028}ls"
    /// How human output writes it.
    static let escaped = #"Evil\x1b[31mRed\x1b]0;pwned\x07\ttab\x7fdel\u{9b}csi\nline"#
        + #"\u{202e}rlo\u{2066}lri\u{2069}\u{200b}zw\u{2028}ls"#
    /// How --json writes it.
    static let jsonEscaped = #""Evil\u001b[31mRed\u001b]0;pwned\u0007\ttab\u007fdel\u009bcsi\nline"#
        + #"\u202erlo\u2066lri\u2069\u200bzw\u2028ls""#
    /// The same string as SQL.
    static let sql = "'Evil' || char(27) || '[31mRed' || char(27) || ']0;pwned' || char(7) || char(9) || 'tab' "
        + "|| char(127) || 'del' || char(155) || 'csi' || char(10) || 'line' || char(8238) || 'rlo' || char(8294) || 'lri' "
        + "|| char(8297) || char(8203) || 'zw' || char(8232) || 'ls'"
    /// Characters that reorder or hide text: bidirectional controls,
    /// zero-width characters, U+FEFF and the line and paragraph separators.
    static let hidden: Set<UInt32> = Set(Array(0x200B...0x200F) + Array(0x202A...0x202E) + Array(0x2066...0x2069)
        + [0x061C, 0x2028, 0x2029, 0x2060, 0xFEFF])

    let daemon: Daemon
    let product: Product
    let configHome: String

    /// Renames a product, its shelf, its store and SPB in the daemon's
    /// SQLite file (with the sqlite3 shell, while the daemon is stopped).
    init() throws {
        daemon = try Daemon()
        configHome = daemon.directory + "/config"
        let store = try daemon.client().store(.cityCode("SPB"), includeProducts: true).store
        let chosen = try #require(store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        #expect(daemon.terminate() == 0)
        let update = """
            UPDATE products SET name = \(Self.sql), brand = \(Self.sql) WHERE uid = '\(chosen.uid)';
            UPDATE shelves SET name = \(Self.sql) WHERE uid = '\(chosen.shelfUID)';
            UPDATE stores SET name = \(Self.sql), address = \(Self.sql) WHERE uid = '\(store.uid)';
            UPDATE cities SET name = \(Self.sql) WHERE code = 'SPB';
            """
        let edit = try runProgram("/usr/bin/sqlite3", [daemon.dataDirectory + "/groser.sqlite3", update], environment: minimalEnvironment())
        #expect(edit.status == 0, "sqlite3 (tools/install-deps installs it): \(edit.err)")
        try daemon.start()
        product = try #require(try daemon.client().shelf(chosen.shelfUID).shelf.products.first { $0.uid == chosen.uid })
        #expect(product.name == Self.evil, "the catalog now holds the name")
    }

    func run(_ arguments: [String], input: String? = nil) throws -> ProgramResult {
        try runProgram(Daemon.groserClient, arguments,
                       environment: minimalEnvironment(["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": configHome]),
                       input: input)
    }

    /// No C0 control but line feed, no DEL, no C1 control (UTF-8 C2 80–9F),
    /// no character of `hidden`.
    func expectNoControls(_ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (i, byte) in bytes.enumerated() {
            let control = (byte < 0x20 && byte != 0x0A) || byte == 0x7F
                || (byte == 0xC2 && i + 1 < bytes.count && (0x80...0x9F).contains(bytes[i + 1]))
            if control {
                Issue.record("\(what): a raw control byte 0x\(String(byte, radix: 16)) at \(i)", sourceLocation: sourceLocation)
                return
            }
        }
        if let raw = String(decoding: bytes, as: UTF8.self).unicodeScalars.first(where: { Self.hidden.contains($0.value) }) {
            Issue.record("\(what): a raw U+\(String(raw.value, radix: 16, uppercase: true))", sourceLocation: sourceLocation)
        }
    }

    @Test("human output escapes every server string", arguments: [
        ["cities"], ["get-store", "--city", "SPB", "--products"], ["get-store", "--city", "SPB"], ["shelf", "SHELF"],
    ])
    func catalogOutput(_ template: [String]) throws {
        let r = try run(template.map { $0 == "SHELF" ? product.shelfUID : $0 })
        #expect(r.status == 0, "\(r.err)")
        expectNoControls(r.outBytes, "stdout")
        expectNoControls(r.errBytes, "stderr")
        #expect(r.out.contains(Self.escaped), "\(r.out.prefix(2000))")
    }

    @Test("carts, checkout, orders and admin answers are escaped, and so are the server's error messages")
    func commerceOutput() throws {
        var outputs: [(String, ProgramResult)] = []
        let add = try run(["cart", "add", product.uid, "--city", "SPB"])
        #expect(add.status == 0, "\(add.err)")
        #expect(add.out.contains(Self.escaped))
        outputs.append(("cart add", add))

        // The server's message names the product: "That would make 100 of …".
        let tooMany = try run(["cart", "add", product.uid, "--qty", "99", "--city", "SPB"])
        #expect(tooMany.status == 64 + 9, "\(tooMany.err)")
        #expect(tooMany.err.contains("FAILED_PRECONDITION") && tooMany.err.contains(Self.escaped), "\(tooMany.err)")
        #expect(tooMany.err.split(separator: "\n").count == 1, "the server's line breaks are escaped too")
        outputs.append(("error", tooMany))

        let paid = try run(["checkout", "--city", "SPB", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1",
                            "--card-from-stdin"], input: "4111 1111 1111 1111\n123\n")
        #expect(paid.status == 0, "\(paid.err)")
        #expect(paid.out.contains(Self.escaped))
        outputs.append(("checkout", paid))

        let orders = try run(["orders"])
        #expect(orders.status == 0 && orders.out.contains(Self.escaped), "\(orders.out)")
        outputs.append(("orders", orders))
        let ordersJSON = try run(["orders", "--json"])
        #expect(ordersJSON.status == 0 && ordersJSON.out.contains(Self.jsonEscaped), "\(ordersJSON.out)")
        outputs.append(("orders --json", ordersJSON))

        let admin = try run(["admin", "set-product", product.uid, "--stock", "50"])
        #expect(admin.status == 0 && admin.out.contains(Self.escaped), "\(admin.err)")
        outputs.append(("admin", admin))

        for (what, r) in outputs {
            expectNoControls(r.outBytes, "\(what) stdout")
            expectNoControls(r.errBytes, "\(what) stderr")
        }
    }

    @Test("--json escapes control characters as JSON does, DEL and C1 included, and reads back as the name", arguments: [
        ["shelf", "SHELF", "--json"], ["cities", "--json"], ["get-store", "--city", "SPB", "--products", "--json"],
        ["cart", "add", "PRODUCT", "--city", "SPB", "--json"],
    ])
    func jsonOutput(_ template: [String]) throws {
        let r = try run(template.map { $0 == "SHELF" ? product.shelfUID : $0 == "PRODUCT" ? product.uid : $0 })
        #expect(r.status == 0, "\(r.err)")
        expectNoControls(r.outBytes, "stdout")
        #expect(r.out.contains(Self.jsonEscaped), "\(r.out.prefix(2000))")
        let object = try JSONSerialization.jsonObject(with: Data(r.out.utf8))
        #expect(Self.strings(in: object).contains(Self.evil), "a JSON reader gets the name back exactly")
    }

    static func strings(in value: Any) -> [String] {
        switch value {
        case let s as String: [s]
        case let a as [Any]: a.flatMap(strings)
        case let d as [String: Any]: d.values.flatMap(strings)
        default: []
        }
    }
}
