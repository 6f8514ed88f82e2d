import Foundation
import GroserClient
import GroserSystem
import Testing

/// What a program run by a test printed and how it ended.
struct ProgramResult {
    var status: Int32
    var out: String
    var err: String
    /// Both streams' bytes, for checks of what reached the terminal.
    var outBytes: [UInt8]
    var errBytes: [UInt8]
}

/// True when tests may run programs as other users (root, with a setpriv
/// that works); tests that cannot do without use `Privileged.requireOtherUsers`.
var canRunAsOtherUsers: Bool { Privileged.otherUsersMissing == nil }

/// Runs `executable` with exactly `environment` (nothing inherited), and as
/// the user `uid` (group `uid`, no other groups) when one is given, through
/// setpriv: a uid needs no password entry for that.
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String],
                as uid: UInt32? = nil, directory: String? = nil, input: String? = nil) throws -> ProgramResult {
    let p = Process()
    if let uid {
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
    } else {
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
    }
    p.environment = environment
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    let stdin = Pipe()
    p.standardInput = input == nil ? FileHandle.nullDevice : stdin
    try p.run()
    if let input {
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
    }
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return ProgramResult(status: p.terminationStatus, out: String(decoding: o, as: UTF8.self),
                         err: String(decoding: e, as: UTF8.self), outBytes: [UInt8](o), errBytes: [UInt8](e))
}

/// The environment groser-client and groserd see in these tests: a PATH,
/// a HOME, and what the test adds; no XDG_RUNTIME_DIR or GROSER_SOCKET
/// unless the test gives one.
func minimalEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var env = ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"]
    // Under a sanitizer (tools/test's ASan pass), its options reach the
    // programs too: without detect_leaks=0 the toolchain's own leaks at exit
    // would make every groserd exit 1.
    for name in ["ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "GROSER_SANITIZER"] {
        if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
    }
    env.merge(extra) { $1 }
    return env
}

/// Copies of groserd and groser-client in a directory every user can read
/// and traverse: the build directory may not be (CI clones under unknown
/// paths; /root is 0700). Removed with the value.
final class PortableBinaries {
    let directory: String
    var groserd: String { directory + "/groserd" }
    var groserClient: String { directory + "/groser-client" }

    init() throws {
        directory = Daemon.makeTemporaryDirectory()
        chmod(directory, 0o755)
        for name in ["groserd", "groser-client"] {
            try FileManager.default.copyItem(atPath: Daemon.binDirectory + "/" + name, toPath: directory + "/" + name)
            chmod(directory + "/" + name, 0o755)
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}

/// A process started in the background (a daemon), killed if still running
/// when released.
final class Background {
    let process = Process()
    let stderr = Pipe()

    init(_ executable: String, _ arguments: [String], environment: [String: String], as uid: UInt32? = nil) throws {
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Waits up to `seconds` for the process to end; its status, or nil.
    func waitForExit(seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// SIGTERM, and the exit status once it has stopped (SIGKILL after 10 s).
    @discardableResult
    func terminate() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        if waitForExit(seconds: 10) == nil { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// What it wrote to standard error. Reading to the end needs the
    /// process gone, so one still running is killed first.
    var errorOutput: String {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// Waits up to `seconds` (scaled by `TestTime.scale`) for `condition`: the
/// way tests wait for something to happen (a log line, a stats counter, a
/// file), instead of sleeping.
func eventually(seconds: Double = 15, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(TestTime.seconds(seconds))
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// A listening socket that answers nothing: a stand-in for another user's
/// impostor daemon, which records whether anyone connected.
final class Impostor {
    let socket: Socket
    let path: String

    init(path: String) throws {
        self.path = path
        socket = try Socket.unixStream(nonBlocking: true)
        try socket.bind(path: path, mode: 0o666)
        try socket.listen(backlog: 8)
    }

    /// True when a connection is waiting to be accepted.
    var wasConnectedTo: Bool { (try? socket.poll(timeoutMilliseconds: 0)) ?? false }

    deinit { socket.close() }
}

/// The lstat of `path`, or nil.
func fileStatus(_ path: String) -> stat? {
    var st = stat()
    return lstat(path, &st) == 0 ? st : nil
}

/// Every regular file under `directory`, its subdirectories included
/// (groserd keeps its customer log in `customers/shard-N/`), as full paths.
func filesUnder(_ directory: String) -> [String] {
    (FileManager.default.subpaths(atPath: directory) ?? []).map { directory + "/" + $0 }.filter { path in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
    }
}

/// Every directory under `directory` (not itself), as full paths.
func directoriesUnder(_ directory: String) -> [String] {
    (FileManager.default.subpaths(atPath: directory) ?? []).map { directory + "/" + $0 }.filter { path in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

/// Expects `body` to fail with groserd's status `code` (and, when given,
/// a message holding `text`).
func expectStatus(_ code: StatusCode, containing text: String? = nil, _ body: () throws -> Void,
                  sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        try body()
        Issue.record("expected \(code)", sourceLocation: sourceLocation)
    } catch let error as GroserError {
        #expect(error.status?.code == code, "\(error)", sourceLocation: sourceLocation)
        if let text {
            #expect(error.status?.message.contains(text) == true, "\(error)", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
    }
}
