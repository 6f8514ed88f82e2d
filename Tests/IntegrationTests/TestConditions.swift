import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// What a test may take for granted about the machine and the clock: the one
// place privileged tests decide whether they can run, and the one scale for
// time bounds.

/// Tests that need root or a kernel facility (another user through setpriv,
/// a tmpfs mount, network namespaces). Each calls `Privileged.require` first:
///
/// - the facility is there: the test runs;
/// - it is missing: the test is skipped (`Test.cancel`), and the runner
///   prints `Test NAME was cancelled after S seconds: "needs …: CAUSE"`
///   (a trait's skip prints `Test NAME skipped: "REASON"`), so `tools/test`
///   can count both with grep;
/// - it is missing and `GROSER_REQUIRE_PRIVILEGED=1` (CI, as root, where all
///   of them exist): the test fails, naming the cause. A skip there would
///   hide a test that no longer runs anywhere.
enum Privileged {
    /// True when the environment asks that no privileged test be skipped.
    static let required = ProcessInfo.processInfo.environment["GROSER_REQUIRE_PRIVILEGED"] == "1"

    /// Runs the test only when `missing` is nil; else skips it with `need`
    /// and the cause, or fails under GROSER_REQUIRE_PRIVILEGED=1.
    static func require(_ need: String, missing cause: String?,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard let cause else { return }
        let reason = "needs \(need): \(cause)"
        if required {
            throw TestFailure("GROSER_REQUIRE_PRIVILEGED=1 and this test \(reason)")
        }
        try Test.cancel(Comment(rawValue: reason), sourceLocation: sourceLocation)
    }

    /// Programs run as other users: root, and a setpriv that can switch.
    static func requireOtherUsers(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try require("root and /usr/bin/setpriv to run programs as other users", missing: otherUsersMissing,
                    sourceLocation: sourceLocation)
    }

    /// A tmpfs mounted by the test: root (CAP_SYS_ADMIN).
    static func requireTmpfs(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try require("to mount a tmpfs (root, CAP_SYS_ADMIN)", missing: tmpfsMissing, sourceLocation: sourceLocation)
    }

    /// Why programs cannot be run as other users here, or nil when they can
    /// (tried once: setpriv to nobody running /bin/true).
    static let otherUsersMissing: String? = {
        guard getuid() == 0 else { return "not root (uid \(getuid()))" }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return "/usr/bin/setpriv is not installed" }
        do {
            let r = try runProgram("/bin/true", [], environment: ["PATH": "/usr/bin:/bin"], as: 65_534)
            return r.status == 0 ? nil : "setpriv --reuid=65534 /bin/true exited \(r.status): \(r.err.trimmingCharacters(in: .whitespacesAndNewlines))"
        } catch {
            return "cannot run setpriv: \(error)"
        }
    }()

    /// Why a tmpfs cannot be mounted here, or nil when it can (tried once).
    static let tmpfsMissing: String? = {
        guard getuid() == 0 else { return "not root (uid \(getuid()))" }
        let dir = Daemon.makeTemporaryDirectory()
        defer { rmdir(dir) }
        guard mount("tmpfs", dir, "tmpfs", 0, "size=1m") == 0 else {
            return "mount(tmpfs) failed: \(String(cString: strerror(errno)))"
        }
        umount(dir)
        return nil
    }()
}

/// One factor for every time bound the tests keep (where the time is the
/// behaviour under test, not a wait): 1 normally; `GROSER_TIME_SCALE` when
/// set (a slow machine, a debug build under load); 5 under a sanitizer
/// (`GROSER_SANITIZER`, set by tools/test's sanitizer passes). Waits for
/// something to happen use `eventually` on an observable condition instead.
enum TestTime {
    static let scale: Double = {
        let environment = ProcessInfo.processInfo.environment
        if let text = environment["GROSER_TIME_SCALE"], let value = Double(text), value >= 1 { return value }
        return environment["GROSER_SANITIZER"] != nil ? 5 : 1
    }()

    /// `seconds`, scaled.
    static func seconds(_ seconds: Double) -> Double { seconds * scale }

    /// `milliseconds` as scaled nanoseconds.
    static func nanoseconds(milliseconds: Double) -> UInt64 { UInt64(milliseconds * scale * 1_000_000) }
}
