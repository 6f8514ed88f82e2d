import Foundation
import GroserClient
import GroserSystem
import Testing

@Suite("protocol v1 on a real socket", .serialized)
struct ProtocolTests {
    let daemon: Daemon
    init() throws { daemon = try Daemon(extraArguments: ["--max-frame-bytes", "65536"]) }

    @Test func pipelinedRequestsAreAllAnsweredWithTheirIds() throws {
        let conn = try RawConnection(path: daemon.socketPath)
        var batch: [UInt8] = []
        var expected: [UInt64: String] = [:]
        let methods: [(RequestMethod, String)] = [
            (.serverInfo, "info"), (.listCities, "cities"),
            (.getStore(selector: .cityCode("SPB"), includeProducts: false), "store"),
            (.getStore(selector: .cityCode("NOPE"), includeProducts: false), "notfound"),
        ]
        for i in 0..<200 {
            let id = UInt64(1000 + i * 7)
            let (method, kind) = methods[i % methods.count]
            batch += Framing.frame(Request(id: id, method: method).encoded())
            expected[id] = kind
        }
        try conn.send(batch)  // one write: the server sees them all at once
        var seen: [UInt64] = []
        for _ in 0..<200 {
            let r = try #require(try conn.receive())
            seen.append(r.id)
            switch (expected[r.id], r.body) {
            case ("info", .serverInfo), ("cities", .listCities), ("store", .getStore): #expect(r.status.isOK)
            case ("notfound", .none): #expect(r.status.code == .notFound)
            default: Issue.record("response \(r.id) has the wrong body for \(expected[r.id] ?? "?")")
            }
        }
        #expect(Set(seen) == Set(expected.keys))
        #expect(seen == seen.sorted(), "groserd v1 answers in request order")
    }

    @Test func anInvalidFrameGetsInvalidArgumentAndTheConnectionStaysUsable() throws {
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Framing.frame([0xff, 0xff, 0xff, 0x07]))
        let bad = try #require(try conn.receive())
        #expect(bad.id == 0)
        #expect(bad.status.code == .invalidArgument)
        try conn.send(Request(id: 5, method: .serverInfo))
        let good = try #require(try conn.receive())
        #expect(good.id == 5 && good.status.isOK)
    }

    @Test func anUnknownMethodGetsUnimplemented() throws {
        let conn = try RawConnection(path: daemon.socketPath)
        // id 9 and field 99 (a method from the future), length-delimited, empty.
        try conn.send(Framing.frame([0x08, 0x09, 0x9a, 0x06, 0x00]))
        let r = try #require(try conn.receive())
        #expect(r.id == 9)
        #expect(r.status.code == .unimplemented)
    }

    @Test(arguments: [65537, 4 * 1024 * 1024 * 1024 - 1])
    func anOversizeFrameGetsResourceExhaustedAndTheConnectionCloses(length: Int) throws {
        let conn = try RawConnection(path: daemon.socketPath)
        let n = UInt32(length)
        // Only the header: the server must refuse before reading any body.
        try conn.send([UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)])
        let r = try #require(try conn.receive())
        #expect(r.status.code == .resourceExhausted)
        #expect(r.status.message.contains("\(length)"))
        #expect(try conn.receive() == nil, "the server closes the connection")
        #expect(try daemon.client().serverInfo().protocolVersion == 1, "the daemon keeps serving")
    }

    @Test func aFrameAtTheMaximumIsAccepted() throws {
        let conn = try RawConnection(path: daemon.socketPath)
        // A ServerInfo request padded to exactly 65536 bytes with field 1000,
        // a length-delimited field the server does not know and skips.
        var body: [UInt8] = [0x08, 0x01, 0x52, 0x00, 0xc2, 0x3e]
        let padLength = 65536 - body.count - 3
        var v = UInt64(padLength)
        while v >= 0x80 { body.append(UInt8(v & 0x7f) | 0x80); v >>= 7 }
        body.append(UInt8(v))
        body += [UInt8](repeating: 0x61, count: padLength)
        #expect(body.count == 65536)
        try conn.send(Framing.frame(body))
        let r = try #require(try conn.receive())
        #expect(r.status.isOK)
        #expect(r.id == 1)
    }

    @Test func aClientVanishingMidFrameDoesNotDisturbOthers() throws {
        let steady = daemon.client()
        for round in 0..<20 {
            let rude = try RawConnection(path: daemon.socketPath)
            let frame = Framing.frame(Request(id: 1, method: .listCities).encoded())
            try rude.send(Array(frame.prefix(round % 2 == 0 ? 2 : frame.count - 1)))
            rude.socket.close()
            #expect(try steady.listCities().cities.count >= 5)
        }
        // Half-written frame from a client that stays connected, while another is served.
        let stalled = try RawConnection(path: daemon.socketPath)
        try stalled.send([0, 0, 0, 50, 0x08])
        #expect(try steady.store(.cityCode("SPB")).city.code == "SPB")
    }

    @Test func theSocketIsCreatedWithMode0660() throws {
        let attrs = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)
        let mode = (attrs[.posixPermissions] as? NSNumber)?.intValue ?? -1
        #expect(mode == 0o660)
    }
}

@Suite("groserd's lifecycle", .serialized)
struct LifecycleTests {
    @Test func aSecondDaemonOnTheSameSocketRefusesToStart() throws {
        let daemon = try Daemon()
        let second = Daemon.launch(socket: daemon.socketPath, data: daemon.directory + "/data2",
                                   stderrPath: daemon.directory + "/second.log")
        second.waitUntilExit()
        #expect(second.terminationStatus == 1)
        let log = (try? String(contentsOfFile: daemon.directory + "/second.log", encoding: .utf8)) ?? ""
        #expect(log.contains("already answering"))
        #expect(try daemon.client().serverInfo().protocolVersion == 1, "the first keeps serving")
    }

    @Test func afterKill9ARestartOnTheSameSocketWorks() throws {
        let daemon = try Daemon()
        daemon.killHard()
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath), "a crash leaves the socket file")
        try daemon.start()
        #expect(try daemon.client().listCities().cities.count >= 5)
        #expect(daemon.log.contains("stale socket"))
    }

    @Test func sigtermRemovesTheSocketAndExitsZero() throws {
        let daemon = try Daemon()
        // A client mid-conversation when the signal arrives.
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 3, method: .listCities))
        #expect(try conn.receive()?.id == 3)
        #expect(daemon.terminate() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(try conn.receive() == nil, "open connections are closed")
    }

    @Test func theCatalogSurvivesARestartWithoutReseeding() throws {
        let daemon = try Daemon()
        let before = try daemon.client().listCities()
        #expect(daemon.terminate() == 0)
        try daemon.start()
        let after = try daemon.client().listCities()
        #expect(before == after)
    }

    @Test func aNonSocketFileAtThePathIsNeverReplaced() throws {
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: dir + "/g.sock", contents: Data("precious".utf8))
        let p = Daemon.launch(socket: dir + "/g.sock", data: dir + "/data", stderrPath: dir + "/log")
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect((try? String(contentsOfFile: dir + "/g.sock", encoding: .utf8)) == "precious")
    }
}
