import Foundation
import GroserClient
import GroserSystem
import Testing

/// What a local client can make groserd hold through frames: unfinished
/// frames are cut off after `--frame-read-timeout` and share one budget
/// (`--max-unfinished-frame-bytes`), and a request of too many fields is
/// refused before protobuf-c unpacks it.
@Suite("frame limits", .serialized)
struct FrameLimitsTests {
    /// A ServerInfo request of exactly `bodyLength` bytes: id, the method,
    /// then field 9 (unknown to the server) padding it out.
    static func paddedServerInfo(id: UInt8, bodyLength: Int) -> [UInt8] {
        let head: [UInt8] = [0x08, id, 0x52, 0x00, 0x4A]
        var padding = bodyLength - head.count - 1
        while padding + head.count + varint(padding).count > bodyLength { padding -= 1 }
        let body = head + varint(padding) + [UInt8](repeating: 0x61, count: padding)
        precondition(body.count == bodyLength)
        return Framing.frame(body)
    }

    static func varint(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        var v = UInt64(n)
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }

    /// The connection's last answer is id 0 RESOURCE_EXHAUSTED, then the
    /// server closes it (end of file, or a reset after the answer).
    static func expectCutOff(_ connection: RawConnection, mentioning words: String,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let answer = try #require(try connection.receive(timeoutMilliseconds: 15_000), sourceLocation: sourceLocation)
        #expect(answer.id == 0, sourceLocation: sourceLocation)
        #expect(answer.status.code == .resourceExhausted, sourceLocation: sourceLocation)
        #expect(answer.status.message.contains(words), "\(answer.status.message)", sourceLocation: sourceLocation)
        do {
            #expect(try connection.receive(timeoutMilliseconds: 5000) == nil, "then closed", sourceLocation: sourceLocation)
        } catch let error as Errno {
            #expect(error == .connectionReset, sourceLocation: sourceLocation)
        }
    }

    /// No byte and no end of file waiting: the server has not closed it.
    static func isOpen(_ connection: RawConnection) throws -> Bool {
        try !connection.socket.poll(timeoutMilliseconds: 0)
    }

    /// True once groserd has read every byte sent on `connection`: on a Unix
    /// socket, SIOCOUTQ is what the peer has not read yet (the sender's
    /// bytes stay charged to it until they are read).
    static func readByServer(_ connection: RawConnection) -> Bool {
        var unread: Int32 = -1
        return ioctl(connection.socket.descriptor, UInt(TIOCOUTQ), &unread) == 0 && unread == 0
    }

    @Test func aFrameThatStopsArrivingIsCutOffWhileOtherClientsAreAnswered() throws {
        let daemon = try Daemon(extraArguments: ["--frame-read-timeout", "1"])
        let stalled = try RawConnection(path: daemon.socketPath)
        let frame = Self.paddedServerInfo(id: 3, bodyLength: 100_000)
        let sentAt = Date()
        try stalled.send(Array(frame.prefix(1000)))

        // A frame sent in two parts well within the timeout is answered.
        let unhurried = try RawConnection(path: daemon.socketPath)
        let small = Self.paddedServerInfo(id: 4, bodyLength: 2000)
        try unhurried.send(Array(small.prefix(700)))
        // The second part goes once groserd has read the first (it then
        // holds an unfinished frame), not after a pause that hopes so.
        #expect(eventually { Self.readByServer(unhurried) }, "groserd did not read the first part")
        try unhurried.send(Array(small.dropFirst(700)))
        let answer = try #require(try unhurried.receive())
        #expect(answer.id == 4 && answer.status.isOK)

        // A well-behaved client on its own connection keeps being answered.
        let client = daemon.client(timeout: 5)
        var calls = 0
        let loopStarted = Date()
        // Until the cut-off is due, and for at least a second of its own
        // (under a sanitizer on a busy machine the steps above take a while).
        while Date().timeIntervalSince(sentAt) < 3 || Date().timeIntervalSince(loopStarted) < 1.5 {
            _ = try client.serverInfo()
            calls += 1
            usleep(20_000)
        }
        #expect(calls > 10)

        try Self.expectCutOff(stalled, mentioning: "did not arrive within 1 s")
        #expect(Date().timeIntervalSince(sentAt) >= 1, "not before its time")
        #expect(daemon.log.contains("not the rest within 1 s"))
        // The unhurried connection is still there and usable.
        try unhurried.send(Request(id: 5, method: .serverInfo))
        #expect(try unhurried.receive()?.id == 5)
    }

    @Test func overTheBudgetTheLargestUnfinishedFrameIsClosedAndSmallerOnesFinish() throws {
        // 1 MB of unfinished frames in all; no timeout within the test.
        let daemon = try Daemon(extraArguments: ["--max-unfinished-frame-bytes", "1000000", "--frame-read-timeout", "120"])
        // (frame body size, bytes sent before stopping). Each holds between
        // what it sent and its frame's size: before the last, at most 900 KB
        // in all; with it, at least 1.1 MB; without the largest, at most 700 KB.
        let shapes = [(600_000, 550_000), (200_000, 150_000), (100_000, 50_000)]
        var frames: [[UInt8]] = []
        var connections: [RawConnection] = []
        for (i, (length, sent)) in shapes.enumerated() {
            let frame = Self.paddedServerInfo(id: UInt8(10 + i), bodyLength: length)
            let c = try RawConnection(path: daemon.socketPath)
            try c.send(Array(frame.prefix(sent)))
            frames.append(frame)
            connections.append(c)
        }
        // Once groserd has read all of it (and so counted it against the
        // budget, in the same turn as the read), under the budget nothing is closed.
        #expect(eventually { connections.allSatisfy(Self.readByServer) }, "groserd did not read the three frames' beginnings")
        for c in connections { #expect(try Self.isOpen(c), "under the budget nothing is closed") }

        let last = Self.paddedServerInfo(id: 13, bodyLength: 400_000)
        let lastConnection = try RawConnection(path: daemon.socketPath)
        try lastConnection.send(Array(last.prefix(350_000)))
        frames.append(last)
        connections.append(lastConnection)

        try Self.expectCutOff(connections[0], mentioning: "is the largest")
        #expect(daemon.log.contains("the largest holder"))
        // The others finish their frames and are answered.
        let sent = shapes.map(\.1) + [350_000]
        for i in 1..<connections.count {
            try connections[i].send(Array(frames[i].dropFirst(sent[i])))
            let answer = try #require(try connections[i].receive(timeoutMilliseconds: 10_000))
            #expect(answer.id == UInt64(10 + i), "connection \(i)")
            #expect(answer.status.isOK, "connection \(i): \(answer.status)")
        }
    }

    @Test func aRequestOfFourMiBOfUnknownFieldsIsRefusedAndTheConnectionGoesOn() throws {
        let daemon = try Daemon()
        let idle = Self.peakResidentKilobytes(daemon.process.processIdentifier) ?? 0
        // id 7, then 2 097 151 copies of field 3 (not in the schema): 4 MiB.
        var body: [UInt8] = [0x08, 0x07]
        body.reserveCapacity(4 * 1024 * 1024)
        while body.count < 4 * 1024 * 1024 { body += [0x18, 0x00] }
        let connection = try RawConnection(path: daemon.socketPath)
        try connection.send(Framing.frame(body) + Framing.frame(Request(id: 9, method: .serverInfo).encoded()))
        let refusal = try #require(try connection.receive(timeoutMilliseconds: 15_000))
        #expect(refusal.id == 0)
        #expect(refusal.status.code == .invalidArgument)
        #expect(refusal.status.message.contains("more than 256 fields"), "\(refusal.status.message)")
        let next = try #require(try connection.receive())
        #expect(next.id == 9 && next.status.isOK, "the connection stays usable")

        // protobuf-c's unpack took this frame from 54 to 216 MB; now the
        // frame costs about its own size. (Meaningless under a sanitizer.)
        if Foundation.ProcessInfo.processInfo.environment["GROSER_SANITIZER"] == nil,
           let peak = Self.peakResidentKilobytes(daemon.process.processIdentifier) {
            #expect(peak - idle < 60_000, "peak resident memory went from \(idle) to \(peak) KiB")
        }
    }

    /// VmHWM: the most memory the process has had resident.
    static func peakResidentKilobytes(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
}
