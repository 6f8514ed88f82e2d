import Foundation
import GroserClient
import GroserSystem
import Testing

/// Another local user against a real groserd (issue 32 §2 and §5): a flood
/// of connections from one uid, idle connections, and an ImportCatalog
/// frame from a user who may not import. The attacker is a Python program
/// run as another uid with setpriv, in the socket's group.
@Suite("connection floods and operator-only frames", .serialized)
struct ConnectionFloodTests {
    /// Opens connections or sends one frame, as told, and says what came
    /// back as one JSON line (see `Attacker`).
    static let script = #"""
    import json, os, socket, struct, sys, time

    def frame(body):
        return struct.pack(">I", len(body)) + body

    def varint(data, i):
        value, shift = 0, 0
        while True:
            b = data[i]; i += 1
            value |= (b & 0x7f) << shift
            if b < 0x80: return value, i
            shift += 7

    def response(s):
        """(id, code, message) of the next frame, or None at the end."""
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk: return None
            buf += chunk
        body = buf[4:4 + struct.unpack(">I", buf[:4])[0]]
        rid, code, message, i = 0, 0, "", 0
        while i < len(body):
            key, i = varint(body, i)
            if key & 7 == 0:
                v, i = varint(body, i)
                if key >> 3 == 1: rid = v
            elif key & 7 == 2:
                n, i = varint(body, i)
                part = body[i:i + n]; i += n
                if key >> 3 == 2:
                    j = 0
                    while j < len(part):
                        k, j = varint(part, j)
                        if k & 7 == 0:
                            v, j = varint(part, j)
                            if k >> 3 == 1: code = v
                        else:
                            m, j = varint(part, j)
                            if k >> 3 == 2: message = part[j:j + m].decode()
                            j += m
            else:
                break
        return rid, code, message

    path, mode = sys.argv[1], sys.argv[2]
    if mode == "hold":
        # Opens N connections and asks ServerInfo on each: an admitted one
        # answers id 1, a refused one sends its status with id 0.
        socks, report = [], {"accepted": 0, "refused": 0, "messages": [], "codes": []}
        for _ in range(int(sys.argv[3])):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            while True:
                try:
                    s.connect(path)
                    break
                except BlockingIOError:  # the listen backlog is full
                    time.sleep(0.001)
            socks.append(s)
        for s in socks:
            try:
                s.sendall(frame(b"\x08\x01\x52\x00"))
            except OSError:
                pass
        for s in socks:
            try:
                r = response(s)
            except OSError:
                r = None
            if r and r[0] == 1:
                report["accepted"] += 1
            else:
                report["refused"] += 1
                if r and r[2] not in report["messages"]:
                    report["messages"].append(r[2])
                    report["codes"].append(r[1])
        print(json.dumps(report), flush=True)
        sys.stdin.read()  # holds them until told to stop
    else:
        # Sends the frame in the file and reports its answer.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        with open(sys.argv[3], "rb") as f:
            s.sendall(f.read())
        r = response(s)
        print(json.dumps({"id": r[0], "code": r[1], "message": r[2]} if r else {}), flush=True)
    """#

    /// The Python program above, run as `uid` in the socket's group
    /// (nogroup; uids without a password entry will do); its report is the
    /// first line it writes.
    final class Attacker {
        let process = Process()
        let input = Pipe()
        let output = Pipe()

        init(_ arguments: [String], uid: UInt32, directory: String) throws {
            let script = directory + "/attack.py"
            if !FileManager.default.fileExists(atPath: script) {
                try ConnectionFloodTests.script.write(toFile: script, atomically: true, encoding: .utf8)
                chmod(script, 0o644)
            }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(uid)", "--regid=65534", "--clear-groups", "/usr/bin/python3", script] + arguments
            process.environment = ["PATH": "/usr/bin:/bin"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        /// The report; nil when the program ended without one.
        func report() -> [String: Any]? {
            var line = Data()
            while true {
                let byte = output.fileHandleForReading.readData(ofLength: 1)
                if byte.isEmpty || byte == Data([0x0A]) { break }
                line += byte
            }
            return (try? JSONSerialization.jsonObject(with: line)) as? [String: Any]
        }

        /// Closes its connections and waits for it to end.
        func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    /// A daemon other users of group nogroup may reach (directory 0711, socket group nogroup).
    func daemon(_ extra: [String]) throws -> Daemon {
        try Privileged.requireOtherUsers()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        return try Daemon(directory: dir, extraArguments: ["--socket-group", "nogroup"] + extra)
    }

    /// 70 connections from one uid against 64 slots took them all, and the
    /// victim's `info` failed until they closed. Now one uid gets a quarter
    /// (16), the rest are refused with a sentence naming the cause, and
    /// another user (nobody), and root, are answered.
    @Test func oneUidCannotTakeEverySlot() throws {
        let d = try daemon(["--max-connections", "64"])
        let attacker = try Attacker([d.socketPath, "hold", "70"], uid: 65_533, directory: d.directory)
        defer { attacker.stop() }
        let report = try #require(attacker.report())
        #expect(report["accepted"] as? Int == 16, "\(report)")
        #expect(report["refused"] as? Int == 54, "\(report)")
        let messages = report["messages"] as? [String] ?? []
        #expect(messages == ["uid 65533 has 16 connections to groserd, its maximum (--max-connections-per-uid); close one first."],
                "\(messages)")
        #expect(report["codes"] as? [Int] == [8], "RESOURCE_EXHAUSTED")
        let victim = try runClientAsNobody(["info"], socket: d.socketPath)
        #expect(victim.status == 0, "\(victim.err)")
        let own = try runClient(["info"], socket: d.socketPath)
        #expect(own.status == 0, "\(own.err)")
        let stats = try d.client().stats()
        #expect(stats.connectionsRefused == 54 && stats.connectionsRefusedPerUID == 54 && stats.connectionsRefusedReserved == 0)
        let human = try runClient(["stats"], socket: d.socketPath)
        #expect(human.out.contains("rejected_connections:54\nrejected_connections_per_uid:54\nrejected_connections_reserved:0\n"), "\(human.out)")
    }

    /// When other users fill every slot but the reserve, the operator (root
    /// here) still connects and is answered.
    @Test func theLastSlotsAreKeptForOperators() throws {
        // 32 slots, 8 per uid, the last 2 kept: four uids of 8 take 30.
        let d = try daemon(["--max-connections", "32"])
        var attackers: [Attacker] = []
        defer { for a in attackers { a.stop() } }
        var accepted = 0
        var messages: [String] = []
        for uid: UInt32 in [65_533, 65_532, 65_531, 65_530] {
            let attacker = try Attacker([d.socketPath, "hold", "8"], uid: uid, directory: d.directory)
            attackers.append(attacker)
            let report = try #require(attacker.report())
            accepted += report["accepted"] as? Int ?? 0
            messages += report["messages"] as? [String] ?? []
        }
        #expect(accepted == 30)
        #expect(messages.count == 1 && messages[0].contains("its last 2 of 32 are kept for its operators"), "\(messages)")
        // groser-client shows the refusal's sentence, also when groserd has
        // closed the socket before the request went out ("Broken pipe").
        let other = try runClientAsNobody(["info"], socket: d.socketPath)
        #expect(other.status == 64 + 14, "UNAVAILABLE: \(other.err)")
        #expect(other.err.contains("its last 2 of 32 are kept for its operators"), "\(other.err)")
        let own = try runClient(["stats"], socket: d.socketPath)
        #expect(own.status == 0, "\(own.err)")
        #expect(own.out.contains("rejected_connections_reserved:3\n"), "\(own.out)")
    }

    /// An idle connection is closed after the idle timeout (counted in
    /// Stats); one holding a watch is not.
    @Test func idleConnectionsAreClosedButWatchingOnesStay() throws {
        let d = try Daemon(extraArguments: ["--idle-timeout", "1"])
        let watching = try RawConnection(path: d.socketPath)
        try watching.send(Request(id: 1, method: .watch(selector: .cityCode("SPB"), sinceVersion: 0)))
        #expect(try watching.receive()?.id == 1)
        let idle = try RawConnection(path: d.socketPath)
        try idle.send(Request(id: 1, method: .serverInfo))
        #expect(try idle.receive()?.id == 1)
        #expect(try idle.receive(timeoutMilliseconds: Int32(TestTime.seconds(10) * 1000)) == nil, "closed after a second of idleness")
        #expect(eventually { (try? d.client().stats().connectionsClosedIdle) == 1 })
        // The sweep that closed the idle one passed the watching one, idle
        // as long: it is still served.
        try watching.send(Request(id: 2, method: .serverInfo))
        #expect(try watching.receive()?.id == 2)
    }

    /// A client keeps its connection between calls; groserd now closes it
    /// after the idle timeout. The next call, a cart change without an
    /// idempotency key included (not safe to send twice), goes out on a new
    /// connection instead of failing: none of it reached groserd.
    @Test func aCallAfterAnIdleCloseGoesOutOnANewConnection() throws {
        let d = try Daemon(extraArguments: ["--idle-timeout", "1"])
        let client = d.client()
        let catalog = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(catalog.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let session = try client.openSession()
        _ = try client.addItem(CartMutation(session: session, storeUID: catalog.uid), productUID: product.uid)
        // Open connections: only the one asking, once groserd has closed the kept one.
        #expect(eventually(seconds: TestTime.seconds(20)) { (try? d.client().stats().connections) == 1 },
                "groserd closed the kept connection as idle")
        let cart = try client.addItem(CartMutation(session: session, storeUID: catalog.uid), productUID: product.uid)
        #expect(cart.lines.first { $0.productUID == product.uid }?.quantity == 2, "applied once")
    }

    /// A 4 MiB ImportCatalog frame of a million empty records from a user
    /// who may not import took groserd's peak memory up by over 200 MB,
    /// only to answer PERMISSION_DENIED. Now it is refused from the
    /// envelope, unread.
    @Test func aNonOperatorsImportIsRefusedBeforeItIsUnpacked() throws {
        let d = try daemon([])
        // Each record is a field 2 of length 0 with the length in three
        // bytes: four bytes a record, the most fields the import limit allows.
        let records = 1_040_000
        var body: [UInt8] = [0x08, 0x07, 0xC2, 0x01]  // id 7, import_catalog (24)
        let inner = records * 4
        var n = inner
        while n >= 0x80 { body.append(UInt8(n & 0x7F) | 0x80); n >>= 7 }
        body.append(UInt8(n))
        body.reserveCapacity(body.count + inner)
        for _ in 0..<records { body += [0x12, 0x80, 0x80, 0x00] }
        let file = d.directory + "/import.frame"
        let length = UInt32(body.count)
        let frame = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
        try Data(frame).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o644)
        let pid = d.process.processIdentifier
        let before = try #require(peakResidentKilobytes(pid: pid))
        let attacker = try Attacker([d.socketPath, "send", file], uid: 65_534, directory: d.directory)
        let answer = try #require(attacker.report())
        attacker.stop()
        #expect(answer["id"] as? Int == 7 && answer["code"] as? Int == 7, "PERMISSION_DENIED: \(answer)")
        #expect((answer["message"] as? String)?.contains("may call ImportCatalog") == true, "\(answer)")
        let after = try #require(peakResidentKilobytes(pid: pid))
        if Foundation.ProcessInfo.processInfo.environment["GROSER_SANITIZER"] == nil {
            #expect(after - before < 20_000, "peak memory grew by \(after - before) KiB")
        }
    }

    /// VmHWM: the process's peak resident memory.
    func peakResidentKilobytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
}
