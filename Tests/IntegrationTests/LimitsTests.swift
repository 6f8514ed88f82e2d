import Foundation
import GroserClient
import GroserSystem
import Testing

/// Bounded resources: connection cap, stalled readers, idle connections,
/// and in-order answers across a catalog change.
@Suite("resource limits", .serialized)
struct LimitsTests {
    @Test func connectionsOverTheMaximumGetUnavailable() throws {
        let daemon = try Daemon(extraArguments: ["--max-connections", "3"])
        // The readiness probe's connection may still be closing: take the
        // three places as they free up.
        var kept: [RawConnection] = []
        let deadline = Date().addingTimeInterval(5)
        while kept.count < 3 && Date() < deadline {
            guard let c = try? RawConnection(path: daemon.socketPath) else { continue }
            if (try? c.send(Request(id: 1, method: .serverInfo))) != nil, (try? c.receive())??.status.isOK == true {
                kept.append(c)
            } else {
                usleep(50_000)
            }
        }
        #expect(kept.count == 3)
        let extra = try RawConnection(path: daemon.socketPath)
        let refusal = try #require(try extra.receive())
        #expect(refusal.status.code == .unavailable)
        #expect(try extra.receive() == nil, "and the connection is closed")
        kept[0].socket.close()
        // Once groserd has seen it close, the place is free: a new
        // connection is answered instead of refused (each refused try is
        // one UNAVAILABLE and a close, as above).
        var refusedMeanwhile = 0
        let freed = eventually {
            guard let again = try? RawConnection(path: daemon.socketPath),
                  (try? again.send(Request(id: 9, method: .serverInfo))) != nil,
                  let answer = (try? again.receive()) ?? nil else { return false }
            if answer.id == 9 && answer.status.isOK { return true }
            #expect(answer.id == 0 && answer.status.code == .unavailable, "\(answer)")
            refusedMeanwhile += 1
            return false
        }
        #expect(freed, "a freed place can be taken (\(refusedMeanwhile) tries refused)")
    }

    @Test func aClientThatNeverReadsIsCutOffAndOthersAreServed() throws {
        let daemon = try Daemon(extraArguments: ["--slow-reader-timeout", "1", "--max-pending-output-bytes", "65536"])
        let deaf = try RawConnection(path: daemon.socketPath)
        let request = Framing.frame(Request(id: 1, method: .getStore(selector: .cityCode("SPB"), includeProducts: true)).encoded())
        // Far more answers (100 KB each) than the socket and the cap hold.
        try deaf.socket.setNonBlocking(true)
        var pushed = 0
        for _ in 0..<400 {
            let r = request.withUnsafeBytes { try? deaf.socket.write($0) }
            if case .processed? = r { pushed += 1 } else { break }
        }
        #expect(pushed > 10)
        let started = Date()
        // Meanwhile a normal client is answered quickly: time is the
        // behaviour here (not stuck behind the deaf connection), so the
        // bound stays, scaled for slow builds.
        let client = daemon.client(timeout: TestTime.seconds(2))
        for _ in 0..<20 { _ = try client.store(.cityCode("MSK")) }
        let took = Date().timeIntervalSince(started)
        #expect(took < TestTime.seconds(2), "20 GetStores took \(took) s beside the deaf connection")
        // The deaf connection is then closed by the server (--slow-reader-timeout 1): its counter says so.
        #expect(eventually { ((try? client.stats())?.slowReadersCutOff ?? 0) >= 1 }, "the deaf connection was not cut off")
        try deaf.socket.setNonBlocking(false)
        // Reading now gets what was sent before the cut, then the end (or a reset).
        var closed = false
        reading: while true {
            do {
                guard try deaf.receive(timeoutMilliseconds: 3000) != nil else { closed = true; break reading }
            } catch let error as Errno {
                closed = error == .connectionReset
                break reading
            } catch {
                break reading  // a timeout: still open
            }
        }
        #expect(closed, "the server closed the connection")
        #expect(daemon.log.contains("closing it"))
        // (Under a sanitizer, its shadow memory and quarantine make RSS meaningless.)
        if Foundation.ProcessInfo.processInfo.environment["GROSER_SANITIZER"] == nil {
            let rss = ProcessInfo.residentKilobytes(pid: daemon.process.processIdentifier) ?? 0
            #expect(rss < 200_000, "groserd holds \(rss) KiB")
        }
    }

    @Test func idleConnectionsAreClosedWhenAsked() throws {
        let daemon = try Daemon(extraArguments: ["--idle-timeout", "1"])
        let idle = try RawConnection(path: daemon.socketPath)
        try idle.send(Request(id: 1, method: .serverInfo))
        #expect(try idle.receive()?.id == 1)
        // Waits for the end of the connection itself; a timeout here throws.
        // The daemon's idle clock starts at its last read, before the answer
        // reached this side, and its timer wheel ticks coarsely: "not at once"
        // is half the second, not the whole of it.
        let answered = Date()
        #expect(try idle.receive(timeoutMilliseconds: Int32(TestTime.seconds(10) * 1000)) == nil, "closed after a second of idleness")
        #expect(Date().timeIntervalSince(answered) >= 0.5, "closed long before the second of idleness was up")
        // With the default (300 s), connections stay.
        let other = try Daemon()
        let stays = try RawConnection(path: other.socketPath)
        // Not a wait for anything (nothing is to happen): the time is the
        // behaviour, idle past the second after which the daemon above closed.
        usleep(1_500_000)
        try stays.send(Request(id: 2, method: .serverInfo))
        #expect(try stays.receive()?.id == 2)
    }

    @Test func aReadPipelinedBehindAChangeSeesTheChange() throws {
        let daemon = try Daemon()
        let store = try daemon.client().store(.cityCode("SPB"), includeProducts: true).store
        let shelf = try #require(store.departments.first?.shelves.first)
        let product = try #require(shelf.products.first)
        let newPrice = product.price.minorUnits + 12_345
        let conn = try RawConnection(path: daemon.socketPath)
        // One write: the change, then a read of the same shelf.
        try conn.send(Framing.frame(Request(id: 1, method: .setProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: newPrice))).encoded())
                      + Framing.frame(Request(id: 2, method: .getShelf(shelfUID: shelf.uid)).encoded()))
        let first = try #require(try conn.receive())
        let second = try #require(try conn.receive())
        #expect(first.id == 1 && first.status.isOK)
        #expect(second.id == 2)
        guard case .getShelf(let contents) = second.body else { Issue.record("no shelf"); return }
        #expect(contents.shelf.products.first { $0.uid == product.uid }?.price.minorUnits == newPrice)
    }
}
