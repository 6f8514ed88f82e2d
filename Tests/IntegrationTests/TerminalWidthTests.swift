import Foundation
import GroserClient
import Testing

/// Cells a string takes on a terminal, for the characters these tests use:
/// CJK ideographs and emoji two, combining accents none, the rest one.
private func cells(_ s: Substring) -> Int {
    s.unicodeScalars.reduce(0) { n, u in
        switch u.value {
        case 0x300...0x36F, 0xFE0F, 0x200D: n
        case 0x4E00...0x9FFF, 0x1F300...0x1FAFF: n + 2
        default: n + 1
        }
    }
}

/// Runs groser-client under a pseudo-terminal (util-linux `script`), as a
/// person at a terminal would, and returns what it printed.
private func runOnTerminal(_ arguments: [String], socket: String, environment: [String: String] = [:]) throws -> String {
    let command = ([Daemon.groserClient] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let r = try runProgram("/usr/bin/script", ["-qec", command, "/dev/null"],
                           environment: minimalEnvironment(["GROSER_SOCKET": socket].merging(environment) { $1 }))
    return r.out.replacingOccurrences(of: "\r\n", with: "\n")
}

/// Columns and prices as a person's terminal shows them.
@Suite("terminal widths and prices", .serialized)
struct TerminalWidthTests {
    /// A shelf whose names take more cells than characters (and fewer),
    /// and a large price (catalog format 1 holds RUB prices only).
    private func daemonWithWideNames() throws -> Daemon {
        let daemon = try Daemon(extraArguments: ["--empty-catalog"])
        let records = [
            #"{"type":"catalog","format":1}"#,
            #"{"type":"city","uid":"city-w","code":"WID","name":"Широтск","default_store_uid":"store-w"}"#,
            #"{"type":"store","uid":"store-w","city_uid":"city-w","name":"Ширь","chain":"Ширь","address":"ул. Широкая, 1"}"#,
            #"{"type":"department","uid":"dep-w","store_uid":"store-w","name":"Молочное"}"#,
            #"{"type":"shelf","uid":"shelf-w","department_uid":"dep-w","name":"Молоко"}"#,
        ] + [
            ("p-cjk", "牛奶 北海道 1L", 12_222_218_250, "RUB"),
            ("p-emoji", "🥛🥛 Молоко", 8_990, "RUB"),
            ("p-accent", "Cafe\u{301} au lait", 12_000, "RUB"),
            ("p-plain", "Milk Hokkaido", 150_000, "RUB"),
        ].map { uid, name, minor, currency in
            #"{"type":"product","uid":"\#(uid)","shelf_uid":"shelf-w","name":"\#(name)","brand":"","unit":"ml","unit_size":1000,"price":{"minor_units":\#(minor),"currency":"\#(currency)"},"image_url":"/img/\#(uid).jpg","stock":5,"often_out_of_stock":false}"#
        }
        let file = daemon.directory + "/wide.jsonl"
        let end = #"{"type":"end","records":\#(records.count - 1)}"#
        try ((records + [end]).joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try runClient(["admin", "import", file], socket: daemon.socketPath)
        #expect(imported.status == 0, "\(imported.err)")
        return daemon
    }

    @Test func columnsLineUpByCellsNotCharacters() throws {
        let daemon = try daemonWithWideNames()
        for out in [try runClient(["shelf", "shelf-w"], socket: daemon.socketPath).out,
                    try runOnTerminal(["shelf", "shelf-w"], socket: daemon.socketPath)] {
            let rows = out.split(separator: "\n").filter { $0.contains("p-") || $0.hasPrefix("PRODUCT") }
            #expect(rows.count == 5, "\(out)")
            // The UID column is the last: it starts at the same cell in every row.
            let starts = rows.map { row in cells(row[..<row.range(of: row.hasPrefix("PRODUCT") ? "UID" : "p-")!.lowerBound]) }
            #expect(Set(starts).count == 1, "UID column starts at cells \(starts):\n\(out)")
            // So does the BRAND column (empty here, so SIZE follows the names).
            let sizes = rows.map { row in cells(row[..<row.range(of: row.hasPrefix("PRODUCT") ? "SIZE" : "1000 ml")!.lowerBound]) }
            #expect(Set(sizes).count == 1, "SIZE column starts at cells \(sizes):\n\(out)")
        }
    }

    @Test func pricesGroupThousandsOnATerminalAndNotInAPipe() throws {
        let daemon = try daemonWithWideNames()
        let piped = try runClient(["shelf", "shelf-w"], socket: daemon.socketPath).out
        #expect(piped.contains("122222182.50 ₽") && piped.contains("1500.00 ₽") && piped.contains("89.90 ₽"), "\(piped)")
        let shown = try runOnTerminal(["shelf", "shelf-w"], socket: daemon.socketPath)
        #expect(shown.contains("122,222,182.50 ₽") && shown.contains("1,500.00 ₽") && shown.contains("120.00 ₽"), "\(shown)")
    }

    @Test func boldOnlyOnATerminalAndNeverWithNoColor() throws {
        let daemon = try Daemon()
        let esc = "\u{1b}[1m"
        let piped = try runClient(["search", "молоко", "--city", "SPB", "--limit", "3"], socket: daemon.socketPath).out
        #expect(!piped.contains(esc) && piped.contains("[Молоко]"), "\(piped)")
        let shown = try runOnTerminal(["search", "молоко", "--city", "SPB", "--limit", "3"], socket: daemon.socketPath)
        #expect(shown.contains(esc + "Молоко"), "\(shown)")
        let plain = try runOnTerminal(["search", "молоко", "--city", "SPB", "--limit", "3"], socket: daemon.socketPath,
                                      environment: ["NO_COLOR": "1"])
        #expect(!plain.contains("\u{1b}[") && plain.contains("[Молоко]"), "\(plain)")
    }
}
