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

    func runAll(_ files: [URL]) throws {
        let harness = try FuzzHarness()
        defer { harness.removeFiles() }
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: file))
            let problems = harness.run(bytes)
            #expect(problems.isEmpty, "\(file.lastPathComponent): \(problems.joined(separator: "; "))")
        }
    }

    @Test func everySavedCrashInputPasses() throws {
        try runAll(Self.inputs("regressions"))
    }

    @Test func everySeedPasses() throws {
        let seeds = Self.inputs("corpus")
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
