import Foundation
import GroserFuzz
import GroserWire
import Testing

/// The fuzz target's code path without the fuzzer: every seed and every
/// saved crash input (Tests/Fuzz) runs through `FuzzHarness` in the normal
/// test suite, so a fixed crash stays fixed.
@Suite("fuzz corpus and regressions")
struct FuzzRegressionTests {
    /// Tests/Fuzz, found from this file's path.
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The input files of one folder of Tests/Fuzz (notes and dotfiles skipped).
    static func inputs(_ folder: String) -> [URL] {
        let dir = fuzzDirectory.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { !$0.hasPrefix(".") && !$0.hasSuffix(".md") }.sorted().map { dir.appendingPathComponent($0) }
    }

    /// Runs every file through one harness; each file's answers (the
    /// harness's trace lines) by name.
    @discardableResult
    func runAll(_ files: [URL]) throws -> [String: [String]] {
        let harness = try FuzzHarness()
        defer { harness.removeFiles() }
        let lines = TraceLines()
        harness.trace = { lines.append($0) }
        var answers: [String: [String]] = [:]
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: file))
            lines.reset()
            let problems = harness.run(bytes)
            answers[file.lastPathComponent] = lines.all
            #expect(problems.isEmpty, "\(file.lastPathComponent): \(problems.joined(separator: "; "))")
        }
        return answers
    }

    /// What each regression input's fix makes groserd answer, frame by frame
    /// (the harness's trace: `#N id ID METHOD → STATUS`): each fragment must
    /// appear in that frame's line. An input not listed here must still pass
    /// the harness; one listed must exist.
    static let regressionAnswers: [String: [String]] = [
        // The third line passes UInt32.max items: refused, not a trap.
        "count-overflow-commit-thread-trap": ["id 91 AddItem → OK", "id 92 AddItem → OK",
                                              "id 93 AddItem → FAILED_PRECONDITION: The cart would hold more than 4294967295 items",
                                              "id 94 AddItem → FAILED_PRECONDITION", "id 95 SetQuantity → OK",
                                              "id 96 GetCart → OK", "id 97 Checkout → FAILED_PRECONDITION"],
        "overlong-strings-stored-and-sent-back": ["id 101 AddItem → OK",
                                                  "id 102 Checkout → INVALID_ARGUMENT: The field delivery_address",
                                                  "id 103 Checkout → INVALID_ARGUMENT: The field idempotency_key",
                                                  "id 104 GetCart → INVALID_ARGUMENT: The field session",
                                                  "id 105 Checkout → OK", "id 106 ListOrders → OK"],
        "too-many-fields-protobuf-c-memory": ["unreadable → INVALID_ARGUMENT: The request has more than 256 fields",
                                              "unreadable → INVALID_ARGUMENT: The request has more than 256 fields",
                                              "unreadable → INVALID_ARGUMENT: The request has more than 256 fields",
                                              "id 114 ServerInfo → OK", "id 115 ServerInfo → OK"],
        // The over-size prefix gets no line of its own: the stream ends with
        // RESOURCE_EXHAUSTED, which the harness checks itself.
        "frame-prefix-over-maximum-by-one": ["id 121 ServerInfo → OK"],
        "partial-frame-at-maximum": ["id 131 none → UNIMPLEMENTED"],
        "at-limit-frame-field-31-cancel-watch-zeros": ["unreadable → INVALID_ARGUMENT: The request has more than 256 fields",
                                                       "id 43 none → UNIMPLEMENTED", "id 44 CancelWatch → NOT_FOUND"],
    ]

    /// Every saved crash or regression input (Tests/Fuzz/regressions)
    /// passes, and says how many ran: an empty folder is a failure, not a
    /// pass that checked nothing.
    @Test func everySavedCrashInputPasses() throws {
        let files = Self.inputs("regressions")
        print("fuzz regressions: \(files.count) input(s) from Tests/Fuzz/regressions: "
              + files.map(\.lastPathComponent).joined(separator: ", "))
        #expect(!files.isEmpty, "Tests/Fuzz/regressions holds no input: this test would check nothing")
        let answers = try runAll(files)
        for (name, expected) in Self.regressionAnswers.sorted(by: { $0.key < $1.key }) {
            guard let lines = answers[name] else {
                Issue.record("Tests/Fuzz/regressions/\(name) is missing")
                continue
            }
            #expect(lines.count == expected.count, "\(name): \(lines.count) answers, expected \(expected.count): \(lines)")
            for (line, fragment) in zip(lines, expected) {
                #expect(line.contains(fragment), "\(name): \"\(line)\" should contain \"\(fragment)\"")
            }
        }
    }

    @Test func everySeedPasses() throws {
        let seeds = Self.inputs("corpus")
        print("fuzz seeds: \(seeds.count) input(s) from Tests/Fuzz/corpus")
        #expect(seeds.count >= 14)
        try runAll(seeds)
    }

    @Test func committedSeedsMatchTheGenerator() throws {
        for (name, bytes) in FuzzSeeds.all() {
            let file = Self.fuzzDirectory.appendingPathComponent("corpus").appendingPathComponent(name)
            let committed = try? [UInt8](Data(contentsOf: file))
            #expect(committed == bytes, "Tests/Fuzz/corpus/\(name) is missing or stale; run: swift run groser-fuzz write-seeds Tests/Fuzz/corpus")
        }
    }

    @Test func committedDictionaryMatchesTheGenerator() throws {
        let file = Self.fuzzDirectory.appendingPathComponent("groser.dict")
        let committed = try String(contentsOf: file, encoding: .utf8)
        #expect(committed == FuzzSeeds.dictionary(),
                "Tests/Fuzz/groser.dict is stale; run: swift run groser-fuzz write-dict Tests/Fuzz/groser.dict")
    }

    @Test func seedsCallEveryMethod() {
        let expected: Set<String> = Set(MethodField.allCases.map(\.methodName)).union(["none"])
        #expect(FuzzSeeds.methods() == expected)
    }

    /// Fixed pseudo-random garbage, and frames that are no Request, pass:
    /// each gets an id-0 INVALID_ARGUMENT answer and nothing breaks.
    @Test func garbagePasses() throws {
        let harness = try FuzzHarness()
        defer { harness.removeFiles() }
        var state: UInt64 = 0x2545_f491_4f6c_dd1d
        func byte() -> UInt8 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        for length in [0, 1, 3, 4, 5, 17, 300, 5000] {
            let bytes = (0..<length).map { _ in byte() }
            #expect(harness.run(bytes).isEmpty, "\(length) garbage bytes")
        }
        let notRequests = Framing.frame([0xff, 0xff]) + Framing.frame([0x0a, 0x05, 0x01]) + Framing.frame([0x08])
        #expect(harness.run(notRequests).isEmpty)
    }
}

/// The trace lines of the input being run (the harness calls its trace on
/// the test's own thread; the lock keeps the compiler's checks content).
final class TraceLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    func reset() { lock.withLock { lines = [] } }
    var all: [String] { lock.withLock { lines } }
}
