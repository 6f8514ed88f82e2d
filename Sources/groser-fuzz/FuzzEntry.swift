#if canImport(Glibc)
import Glibc
#endif
import GroserFuzz
import GroserSystem

// Built two ways. `tools/fuzz` builds it with -DGROSER_FUZZ and
// -sanitize=fuzzer,address: then `main` hands over to libFuzzer's driver,
// which calls LLVMFuzzerTestOneInput once per input. (SwiftPM links every
// executable with its own entry point as `main`, so libFuzzer's `main` is
// not used; LLVMFuzzerRunDriver is the documented way in.) A plain
// `swift build` makes a replayer that runs files through the same harness
// with no fuzzer, and writes the seed corpus.

#if GROSER_FUZZ
import CLibFuzzer

// One harness for the whole fuzzing process: opening the store and encoding
// the catalog per input would make every run a thousand times slower.
// libFuzzer calls the entry point from one thread only.
nonisolated(unsafe) private var harness: FuzzHarness?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    if harness == nil {
        do { harness = try FuzzHarness() } catch { fatalError("groser-fuzz: cannot set up the harness: \(error)") }
    }
    let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    let problems = harness!.run(input)
    if !problems.isEmpty {
        // A broken invariant is a finding: crash so libFuzzer keeps the input.
        fatalError("groser-fuzz: " + problems.joined(separator: "; "))
    }
    return 0
}

@main
enum GroserFuzzDriver {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzTestOneInput(data, size) })
    }
}

#else

@main
enum GroserFuzzReplay {
    static let usage = """
    usage: groser-fuzz FILE...            run each file through the fuzz harness (no fuzzer);
                                          GROSER_FUZZ_TRACE=1 prints every answer
           groser-fuzz write-seeds DIR    write the seed corpus into DIR
           groser-fuzz write-dict FILE    write the fuzzing dictionary (Tests/Fuzz/groser.dict)
    The fuzzer itself is built and run by tools/fuzz.
    """

    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.isEmpty || arguments[0] == "-h" || arguments[0] == "--help" {
            StandardStreams.out(usage + "\n")
            exit(arguments.isEmpty ? 2 : 0)
        }
        if arguments[0] == "write-seeds" {
            guard arguments.count == 2 else { StandardStreams.err(usage + "\n"); exit(2) }
            do {
                for (name, bytes) in FuzzSeeds.all() {
                    try Files.writeAtomically(arguments[1] + "/" + name, bytes, mode: 0o644)
                }
            } catch {
                StandardStreams.err("groser-fuzz: cannot write the seeds: \(error)\n")
                exit(1)
            }
            exit(0)
        }
        if arguments[0] == "write-dict" {
            guard arguments.count == 2 else { StandardStreams.err(usage + "\n"); exit(2) }
            do { try Files.writeAtomically(arguments[1], Array(FuzzSeeds.dictionary().utf8), mode: 0o644) } catch {
                StandardStreams.err("groser-fuzz: cannot write the dictionary: \(error)\n")
                exit(1)
            }
            exit(0)
        }
        let harness: FuzzHarness
        do { harness = try FuzzHarness() } catch {
            StandardStreams.err("groser-fuzz: cannot set up the harness: \(error)\n")
            exit(1)
        }
        if ProcessInfo.environment("GROSER_FUZZ_TRACE") != nil {
            harness.trace = { StandardStreams.out($0 + "\n") }
        }
        var failed = 0
        for path in arguments {
            let bytes: [UInt8]
            do {
                guard let read = try Files.read(path) else {
                    StandardStreams.err("groser-fuzz: \(path): no such file\n")
                    failed += 1
                    continue
                }
                bytes = read
            } catch {
                StandardStreams.err("groser-fuzz: \(path): \(error)\n")
                failed += 1
                continue
            }
            let problems = harness.run(bytes)
            if problems.isEmpty {
                StandardStreams.out("ok    \(path) (\(bytes.count) bytes)\n")
            } else {
                failed += 1
                StandardStreams.out("FAIL  \(path): \(problems.joined(separator: "; "))\n")
            }
        }
        harness.removeFiles()
        exit(failed > 0 ? 1 : 0)
    }
}

#endif
