import Foundation
import Testing

/// The repository's root, from this file's path (Tests/IntegrationTests/…).
let repositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

/// Every `--option` in `text`.
private func options(in text: String) -> Set<String> {
    var found: Set<String> = []
    let regex = try! NSRegularExpression(pattern: "--[a-z][a-z-]*[a-z]")
    let ns = text as NSString
    for m in regex.matches(in: text, range: NSRange(location: 0, length: ns.length)) {
        found.insert(ns.substring(with: m.range))
    }
    return found
}

@Suite("the documents agree with the binaries")
struct DocumentationTests {
    @Test func protocolSynopsisListsEveryOptionOfGroserdHelp() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.groserd)
        p.arguments = ["--help"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let help = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)

        let doc = try String(contentsOfFile: repositoryRoot + "/docs/PROTOCOL.md", encoding: .utf8)
        guard let start = doc.range(of: "Daemon command line:"),
              let open = doc.range(of: "```", range: start.upperBound..<doc.endIndex),
              let close = doc.range(of: "```", range: open.upperBound..<doc.endIndex) else {
            Issue.record("docs/PROTOCOL.md has no \"Daemon command line:\" code block")
            return
        }
        let synopsis = String(doc[open.upperBound..<close.lowerBound])
        let helpOptions = options(in: help)
        let documented = options(in: synopsis)
        #expect(helpOptions.count >= 10, "read groserd --help: \(helpOptions.sorted())")
        #expect(helpOptions.subtracting(documented).isEmpty,
                "in --help but not in PROTOCOL.md's synopsis: \(helpOptions.subtracting(documented).sorted())")
        #expect(documented.subtracting(helpOptions).isEmpty,
                "in PROTOCOL.md's synopsis but not in --help: \(documented.subtracting(helpOptions).sorted())")
    }

    @Test func benchmarksSynopsisListsEveryOptionOfGroserBenchHelp() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.binDirectory + "/groser-bench")
        p.arguments = ["--help"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let help = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)

        // The options the help lists, one a line (not those its text mentions, like groserd's --max-quantity).
        let listed = help.split(separator: "\n").compactMap { line -> String? in
            let word = line.drop { $0 == " " }.prefix { !$0.isWhitespace && $0 != "," }
            return line.hasPrefix("  ") && word.hasPrefix("--") ? String(word) : nil
        }
        let helpOptions = Set(listed).subtracting(["--help"])
        let doc = try String(contentsOfFile: repositoryRoot + "/docs/BENCHMARKS.md", encoding: .utf8)
        guard let start = doc.range(of: "## groser-bench"),
              let open = doc.range(of: "```", range: start.upperBound..<doc.endIndex),
              let close = doc.range(of: "```", range: open.upperBound..<doc.endIndex) else {
            Issue.record("docs/BENCHMARKS.md has no \"## groser-bench\" code block")
            return
        }
        let documented = options(in: String(doc[open.upperBound..<close.lowerBound]))
        #expect(helpOptions.count >= 10, "read groser-bench --help: \(helpOptions.sorted())")
        #expect(helpOptions.subtracting(documented).isEmpty,
                "in --help but not in BENCHMARKS.md's synopsis: \(helpOptions.subtracting(documented).sorted())")
        #expect(documented.subtracting(helpOptions).isEmpty,
                "in BENCHMARKS.md's synopsis but not in --help: \(documented.subtracting(helpOptions).sorted())")
    }
}
