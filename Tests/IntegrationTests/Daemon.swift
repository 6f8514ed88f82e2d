import Foundation
import GroserClient
import GroserSystem

/// A real groserd started on a short temporary socket with its own data
/// directory, stopped (SIGTERM, then SIGKILL) when the test is done.
final class Daemon: @unchecked Sendable {
    let directory: String
    let socketPath: String
    let dataDirectory: String
    let imageBaseURL: String
    private(set) var process: Process
    let stderrPath: String
    /// Options given at creation, used again by every restart.
    let extraArguments: [String]

    /// Where `swift build` put the executables: next to the test bundle.
    static let binDirectory: String = {
        if let dir = ProcessInfo.processInfo.environment["GROSER_BIN_DIR"] { return dir }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // The runner is <bin>/groserPackageTests.xctest (a file on Linux).
        if url.lastPathComponent.hasSuffix(".xctest") { url = url.deletingLastPathComponent() }
        return url.path
    }()

    static var groserd: String { binDirectory + "/groserd" }
    static var groserClient: String { binDirectory + "/groser-client" }

    /// A fresh temporary directory with a short path (sockets allow 107 bytes).
    static func makeTemporaryDirectory() -> String {
        var template = Array("/tmp/gsr-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        return made!
    }

    /// The network namespace groserd runs in (`ip netns exec`), if any.
    let networkNamespace: String?

    init(directory: String? = nil, extraArguments: [String] = [], imageBaseURL: String = "http://img.test:8080",
         networkNamespace: String? = nil) throws {
        self.networkNamespace = networkNamespace
        self.directory = directory ?? Daemon.makeTemporaryDirectory()
        socketPath = self.directory + "/g.sock"
        dataDirectory = self.directory + "/data"
        stderrPath = self.directory + "/groserd.log"
        self.imageBaseURL = imageBaseURL
        self.extraArguments = extraArguments
        process = Process()
        try start()
    }

    /// Starts groserd and waits until it answers.
    func start() throws {
        process = Daemon.launch(socket: socketPath, data: dataDirectory, imageBaseURL: imageBaseURL,
                                stderrPath: stderrPath, extra: extraArguments, networkNamespace: networkNamespace)
        // A safety net, not a bound on start-up: under ASan and a loaded
        // machine a start that reads a PostgreSQL catalog took over 15 s.
        let limit = TestTime.seconds(60)
        let deadline = Date().addingTimeInterval(limit)
        while Date() < deadline {
            if !process.isRunning {
                throw TestFailure("groserd exited with \(process.terminationStatus): \(log)")
            }
            if (try? GroserClient(socketPath: socketPath, timeout: 1).serverInfo()) != nil { return }
            usleep(20_000)
        }
        throw TestFailure("groserd did not answer within \(Int(limit)) s: \(log)")
    }

    static func launch(socket: String, data: String, imageBaseURL: String = "http://img.test:8080",
                       stderrPath: String, extra: [String] = [], networkNamespace: String? = nil) -> Process {
        let p = Process()
        let arguments = ["--socket", socket, "--data", data, "--image-base-url", imageBaseURL, "--threads", "2"] + extra
        if let networkNamespace {
            // `ip netns exec` enters the namespace and execs groserd: same pid.
            p.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            p.arguments = ["netns", "exec", networkNamespace, groserd] + arguments
        } else {
            p.executableURL = URL(fileURLWithPath: groserd)
            p.arguments = arguments
        }
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let handle = FileHandle(forWritingAtPath: stderrPath)!
        handle.seekToEndOfFile()
        p.standardError = handle
        p.standardOutput = FileHandle.nullDevice
        try! p.run()
        return p
    }

    var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    func client(timeout: Double = 5) -> GroserClient { GroserClient(socketPath: socketPath, timeout: timeout) }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    func terminate() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func killHard() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A raw connection for tests that speak frames by hand (one thread at a time).
final class RawConnection: @unchecked Sendable {
    let socket: Socket
    var decoder = FrameDecoder(maximumFrameBytes: 64 * 1024 * 1024)

    init(path: String) throws {
        socket = try Socket.unixStream(nonBlocking: false)
        try socket.connect(path: path)
    }

    deinit { if socket.isOpen { socket.close() } }

    func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try socket.writeAll($0) }
    }

    func send(_ request: Request) throws { try send(Framing.frame(request.encoded())) }

    /// The next response, or nil when the server closed the connection.
    func receive(timeoutMilliseconds: Int32 = 5000) throws -> Response? {
        while true {
            if let frame = try decoder.next() { return try Response.decode(Array(frame)) }
            guard try socket.poll(timeoutMilliseconds: timeoutMilliseconds) else { throw TestFailure("no response within \(timeoutMilliseconds) ms") }
            let n = try decoder.writeTail(capacity: 65536) { raw in
                switch try socket.read(into: raw) {
                case .processed(let n): return n
                case .wouldBlock: return 0
                }
            }
            if n == 0 { return nil }
        }
    }
}

/// Runs groser-client and captures its exit code and output.
func runClient(_ arguments: [String], socket: String, configHome: String? = nil) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: Daemon.groserClient)
    p.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["GROSER_SOCKET"] = socket
    if let configHome { env["XDG_CONFIG_HOME"] = configHome }
    p.environment = env
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}
