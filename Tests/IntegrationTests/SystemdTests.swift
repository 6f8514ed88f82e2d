import Foundation
import GroserClient
import GroserSystem
import Testing

/// groserd as a system service, for real: started by systemd-socket-activate
/// on the first connection, sd_notify datagrams read from a NOTIFY_SOCKET
/// this test makes, and abstract sockets.
@Suite("systemd and the socket", .serialized)
struct SystemdTests {
    private func start(_ arguments: [String], executable: String = Daemon.groserd, environment: [String: String] = [:],
                       log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        p.standardError = FileHandle(forWritingAtPath: log)
        p.standardOutput = FileHandle(forWritingAtPath: log)
        try p.run()
        return p
    }

    private func stop(_ p: Process) -> Int32 {
        if p.isRunning { kill(p.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { usleep(10_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        return p.terminationStatus
    }

    @Test func systemdSocketActivateStartsGroserdOnTheFirstConnection() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate), "systemd-socket-activate is missing (Debian's systemd package)")
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let socket = dir + "/g.sock"
        let log = dir + "/log"
        let p = try start(["-l", socket, "--fdname=groserd", Daemon.groserd, "--data", dir + "/data", "--threads", "2"],
                          executable: activate, log: log)
        defer { _ = stop(p) }
        // systemd-socket-activate made the socket; groserd is not running yet.
        let made = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) && Date() < made { usleep(10_000) }
        #expect(Files.isSocket(socket))
        let before = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(!before.contains("listening on"), "groserd started before any connection: \(before)")
        // The first connection starts it, and is answered.
        let info = try GroserClient(socketPath: socket, timeout: 15).serverInfo()
        #expect(info.protocolVersion == 1)
        // The event loops answer before the start-up line is logged, so the
        // line may land a moment after the answer: wait for it.
        let logged = Date().addingTimeInterval(10)
        var text = try String(contentsOfFile: log, encoding: .utf8)
        while !text.contains("listening on the socket") && Date() < logged {
            usleep(10_000)
            text = try String(contentsOfFile: log, encoding: .utf8)
        }
        #expect(text.contains("listening on the socket systemd passed (descriptor 3, \"groserd\")"), "\(text)")
        #expect(!text.contains("removing stale socket"))
        _ = try GroserClient(socketPath: socket, timeout: 5).store(.cityCode("SPB"))
        #expect(stop(p) == 0)
        // The socket is systemd's: groserd did not remove it.
        let after = try String(contentsOfFile: log, encoding: .utf8)
        #expect(after.contains("stopped") && !after.contains("removed \(socket)"), "\(after)")
    }

    @Test func groserdSendsReadyWatchdogAndStoppingToTheNotifySocket() throws {
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let notifyPath = dir + "/notify"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(notifyPath.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func datagrams(until done: ([String]) -> Bool, within seconds: Double) -> [String] {
            var got: [String] = []
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline && !done(got) {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { got.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            }
            return got
        }
        let p = try start(["--socket", dir + "/g.sock", "--data", dir + "/data", "--threads", "2"],
                          environment: ["NOTIFY_SOCKET": notifyPath, "WATCHDOG_USEC": "400000"], log: dir + "/log")
        defer { _ = stop(p) }
        let startup = datagrams(until: { $0.filter { $0 == "WATCHDOG=1" }.count >= 2 }, within: 15)
        let ready = try #require(startup.first { $0.contains("READY=1") }, "no READY=1 in \(startup)")
        #expect(ready.contains("MAINPID=\(p.processIdentifier)"))
        #expect(ready.contains("STATUS=listening on \(dir)/g.sock"))
        #expect(startup.filter { $0 == "WATCHDOG=1" }.count >= 2, "\(startup)")
        // READY comes once the socket answers.
        #expect(try GroserClient(socketPath: dir + "/g.sock", timeout: 5).serverInfo().protocolVersion == 1)
        kill(p.processIdentifier, SIGTERM)
        let end = datagrams(until: { $0.contains("STOPPING=1") }, within: 10)
        #expect(end.contains("STOPPING=1"), "\(end)")
        #expect(stop(p) == 0)
    }

    @Test func anAbstractSocketIsServedWithNoFile() throws {
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let name = "@groser-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let p = try start(["--socket", name, "--data", dir + "/data", "--threads", "2"], log: dir + "/log")
        defer { _ = stop(p) }
        let client = GroserClient(socketPath: name, timeout: 2)
        let deadline = Date().addingTimeInterval(15)
        var info: ServerInfo?
        while info == nil && Date() < deadline && p.isRunning {
            info = try? client.serverInfo()
            if info == nil { usleep(20_000) }
        }
        #expect(info?.protocolVersion == 1)
        #expect(try runClient(["--socket", name, "cities"], socket: name).status == 0)
        // A second groserd on the same name is refused with a clear line.
        let second = try start(["--socket", name, "--data", dir + "/data2"], log: dir + "/log2")
        second.waitUntilExit()
        #expect(second.terminationStatus == 1)
        let refused = try String(contentsOfFile: dir + "/log2", encoding: .utf8)
        #expect(refused.contains("the abstract socket \(name) is taken"), "\(refused)")
        #expect(stop(p) == 0)
        let text = try String(contentsOfFile: dir + "/log", encoding: .utf8)
        #expect(text.contains("listening on \(name)"))
    }

    @Test func versionAndJSONLogs() throws {
        let version = try runProgram(Daemon.groserd, ["--version"], environment: minimalEnvironment())
        #expect(version.status == 0)
        #expect(version.out.hasPrefix("groserd "))

        let daemon = try Daemon(extraArguments: ["--log-format", "json", "--log-level", "debug"])
        _ = try daemon.client().store(.cityCode("SPB"))
        daemon.terminate()
        let lines = daemon.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            let time = try #require(object["time"] as? String)
            #expect(time.count == 24 && time.hasSuffix("Z") && time.contains("."), "milliseconds in \(time)")
            #expect(object["level"] is String && object["message"] is String)
        }
        let messages = lines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["message"] as? String }
        #expect(messages.contains { $0.contains("listening on") && $0.contains("products") && $0.hasPrefix("groserd ") })
        // One line per request at debug: connection id, request id, method, status, µs.
        #expect(messages.contains { $0.range(of: #"^connection #\d+ request \d+ GetStore OK \d+ µs$"#, options: .regularExpression) != nil },
                "\(messages)")
    }

    @Test func theContribUnitFilesVerify() throws {
        let analyze = "/usr/bin/systemd-analyze"
        try #require(FileManager.default.isExecutableFile(atPath: analyze), "systemd-analyze is missing (Debian's systemd package)")
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["groserd.socket", "groserd.service"] {
            let text = try String(contentsOfFile: repositoryRoot + "/contrib/systemd/" + name, encoding: .utf8)
            // The unit names the installed binary; verify it with the one just built.
            try text.replacingOccurrences(of: "/usr/local/bin/groserd", with: Daemon.groserd)
                .write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: analyze)
        p.arguments = ["verify", "--man=no", dir + "/groserd.socket", dir + "/groserd.service"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0 && text.isEmpty, "systemd-analyze verify: \(text)")
        let service = try String(contentsOfFile: dir + "/groserd.service", encoding: .utf8)
        for setting in ["Type=notify", "WatchdogSec=", "DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=groser",
                        "RuntimeDirectory=groser", "NoNewPrivileges=yes", "SystemCallFilter=@system-service"] {
            #expect(service.contains(setting), "groserd.service lacks \(setting)")
        }
    }
}
