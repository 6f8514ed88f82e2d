import Foundation
import GroserClient
import GroserSystem
import Testing

/// Watch against a real groserd: frames with the Watch's id and
/// `continues`, the right versions, coalescing, cancel, resume and reload,
/// order with owed answers, and a watcher that never reads.
@Suite("Watch", .serialized)
struct WatchTests {
    /// The SPB default store's first products, for price changes.
    private func spbProducts(_ daemon: Daemon) throws -> (store: StoreCatalog, products: [Product]) {
        let catalog = try daemon.client().store(.cityCode("SPB"), includeProducts: true)
        let products = catalog.store.departments.flatMap { $0.shelves.flatMap(\.products) }
        return (catalog, products)
    }

    private func watchEvent(_ r: Response?, id: UInt64) throws -> WatchEvent {
        let response = try #require(r)
        #expect(response.id == id)
        #expect(response.status.isOK, "\(response.status)")
        #expect(response.continues, "a watch frame must say more frames follow")
        guard case .watch(let event) = response.body else { throw TestFailure("not a watch frame: \(response)") }
        return event
    }

    @Test func aWatcherSeesAPriceChangeWithTheRightVersions() throws {
        let daemon = try Daemon()
        let (catalog, products) = try spbProducts(daemon)
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 7, method: .watch(selector: .cityCode("spb"), sinceVersion: 0)))
        let first = try watchEvent(conn.receive(), id: 7)
        #expect(first.initial)
        #expect(first.storeUID == catalog.store.uid)
        #expect(first.storeVersion == catalog.storeVersion)
        #expect(!first.reload && first.products.isEmpty)

        let p = products[0]
        let newPrice = p.price.minorUnits + 1_00
        let changed = try daemon.client().setProduct(ProductUpdate(productUID: p.uid, priceMinorUnits: newPrice, stock: 0))
        let next = try watchEvent(conn.receive(), id: 7)
        #expect(!next.initial && !next.reload)
        #expect(next.previousVersion == first.storeVersion)
        #expect(next.storeVersion == changed.catalogVersion)
        #expect(next.storeVersion > first.storeVersion)
        #expect(next.shelfUIDs == [p.shelfUID])
        #expect(next.products == [ProductChange(uid: p.uid, shelfUID: p.shelfUID,
                                                price: Money(minorUnits: newPrice, currency: p.price.currency), outOfStock: true)])
        // GetStore agrees with the frame's version.
        let after = try daemon.client().store(.storeUID(catalog.store.uid))
        #expect(after.storeVersion == next.storeVersion)
    }

    @Test func theAsyncStreamDeliversChanges() async throws {
        let daemon = try Daemon()
        let (catalog, products) = try spbProducts(daemon)
        let client = daemon.client()
        var iterator = client.watch(city: "SPB").makeAsyncIterator()
        let first = try #require(try await iterator.next())
        #expect(first.initial && first.storeVersion == catalog.storeVersion)
        _ = try await Task.detached {
            try daemon.client().setProduct(ProductUpdate(productUID: products[1].uid, priceMinorUnits: products[1].price.minorUnits + 5))
        }.value
        let next = try #require(try await iterator.next())
        #expect(next.products.map(\.uid) == [products[1].uid])
        #expect(next.previousVersion == first.storeVersion)
    }

    @Test func cancelWatchEndsTheStreamThenAnswers() throws {
        let daemon = try Daemon()
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 3, method: .watch(selector: .cityCode("MSK"), sinceVersion: 0)))
        _ = try watchEvent(conn.receive(), id: 3)
        try conn.send(Request(id: 4, method: .cancelWatch(watchID: 3)))
        let last = try #require(try conn.receive())
        #expect(last.id == 3 && last.status.code == .cancelled && !last.continues)
        let answer = try #require(try conn.receive())
        #expect(answer.id == 4 && answer.status.isOK)
        guard case .cancelWatch = answer.body else { Issue.record("not a CancelWatch answer: \(answer)"); return }
        // Cancelling again: no such watch.
        try conn.send(Request(id: 5, method: .cancelWatch(watchID: 3)))
        let again = try #require(try conn.receive())
        #expect(again.id == 5 && again.status.code == .notFound)
        // A change after the cancel sends nothing to this connection: the
        // next frame is the answer to the next request.
        let products = try spbProducts(daemon).products
        _ = try daemon.client().setProduct(ProductUpdate(productUID: products[0].uid, priceMinorUnits: 999))
        try conn.send(Request(id: 6, method: .serverInfo))
        #expect(try conn.receive()?.id == 6)
        // Stats counts the first CancelWatch as answered OK (its own answer,
        // not the watch's CANCELLED end) and the second as NOT_FOUND.
        let cancels = try #require(try daemon.client().stats().methods.first { $0.method == "CancelWatch" })
        #expect(cancels.requests == 2 && cancels.errors == 1)
    }

    @Test func badWatchesAreRefusedWithAClearStatus() throws {
        let daemon = try Daemon()
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 1, method: .watch(selector: nil, sinceVersion: 0)))
        let none = try #require(try conn.receive())
        #expect(none.status.code == .invalidArgument && !none.continues)
        try conn.send(Request(id: 2, method: .watch(selector: .storeUID("no-such-store"), sinceVersion: 0)))
        #expect(try conn.receive()?.status.code == .notFound)
        try conn.send(Request(id: 3, method: .watch(selector: .cityCode("SPB"), sinceVersion: 0)))
        _ = try watchEvent(conn.receive(), id: 3)
        try conn.send(Request(id: 3, method: .watch(selector: .cityCode("MSK"), sinceVersion: 0)))
        #expect(try conn.receive()?.status.code == .alreadyExists)
    }

    @Test func resumeFromSinceVersionCatchesUpAndAFutureVersionMeansReload() throws {
        let daemon = try Daemon()
        let (catalog, products) = try spbProducts(daemon)
        let held = catalog.storeVersion
        let admin = daemon.client()
        _ = try admin.setProduct(ProductUpdate(productUID: products[0].uid, priceMinorUnits: 111))
        _ = try admin.setProduct(ProductUpdate(productUID: products[2].uid, priceMinorUnits: 222))
        _ = try admin.setProduct(ProductUpdate(productUID: products[0].uid, priceMinorUnits: 333))
        let now = try admin.store(.storeUID(catalog.store.uid)).storeVersion

        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 1, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: held)))
        let first = try watchEvent(conn.receive(), id: 1)
        #expect(first.initial && !first.reload)
        #expect(first.previousVersion == held && first.storeVersion == now)
        // Both products, each at its latest price.
        let prices = Dictionary(uniqueKeysWithValues: first.products.map { ($0.uid, $0.price.minorUnits) })
        #expect(prices == [products[0].uid: 333, products[2].uid: 222])

        // A version the daemon never had (a client of another database).
        try conn.send(Request(id: 2, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: now + 1000)))
        let future = try watchEvent(conn.receive(), id: 2)
        #expect(future.initial && future.reload && future.products.isEmpty)

        // After a restart the history starts afresh: an older version means reload.
        daemon.terminate()
        try daemon.start()
        let again = try RawConnection(path: daemon.socketPath)
        try again.send(Request(id: 1, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: held)))
        let reload = try watchEvent(again.receive(), id: 1)
        #expect(reload.reload && reload.storeVersion == now && reload.previousVersion == held)
        // Up to date: nothing to catch up.
        try again.send(Request(id: 2, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: now)))
        let current = try watchEvent(again.receive(), id: 2)
        #expect(!current.reload && current.products.isEmpty && current.storeVersion == now)
    }

    @Test func anImportTellsTheWatcherToReload() throws {
        let daemon = try Daemon(extraArguments: ["--empty-catalog"])
        let file = try generatedCatalog(cities: 1, storesPerCity: 1, productsPerStore: 50, in: daemon.directory)
        #expect(try runClient(["admin", "import", file], socket: daemon.socketPath).status == 0)
        let store = try daemon.client().store(.cityCode("MSK"))
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 1, method: .watch(selector: .cityCode("MSK"), sinceVersion: store.storeVersion)))
        let first = try watchEvent(conn.receive(), id: 1)
        #expect(first.initial && !first.reload && first.storeVersion == store.storeVersion)
        // The same file again with every price changed: an import, so the
        // frame cannot name products one by one.
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "\"minor_units\":", with: "\"minor_units\":1")
        let changed = daemon.directory + "/changed.jsonl"
        try text.write(toFile: changed, atomically: true, encoding: .utf8)
        let r = try runClient(["admin", "import", changed], socket: daemon.socketPath)
        #expect(r.status == 0, "\(r.err)")
        let next = try watchEvent(conn.receive(), id: 1)
        #expect(next.reload && next.products.isEmpty)
        #expect(next.previousVersion == first.storeVersion)
        #expect(next.storeVersion == (try daemon.client().store(.cityCode("MSK")).storeVersion))
    }

    @Test func aBurstOfChangesCoalescesForAWatcherThatReadsLate() throws {
        let daemon = try Daemon()
        let (catalog, products) = try spbProducts(daemon)
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 1, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: 0)))
        let first = try watchEvent(conn.receive(), id: 1)
        // 300 changes pipelined on one admin connection.
        let admin = try RawConnection(path: daemon.socketPath)
        var frames: [UInt8] = []
        let count = 300
        for i in 0..<count {
            let p = products[i % 10]
            frames += Framing.frame(Request(id: UInt64(i + 1), method: .setProduct(
                ProductUpdate(productUID: p.uid, priceMinorUnits: 10_000 + Int64(i)))).encoded())
        }
        try admin.send(frames)
        for _ in 0..<count { _ = try #require(try admin.receive()) }
        let final = try admin.store(catalog.store.uid, daemon)
        // Read every watch frame the daemon sent, until the final version.
        var events: [WatchEvent] = []
        var latest: [String: Int64] = [:]
        var version = first.storeVersion
        while version < final {
            let e = try watchEvent(conn.receive(), id: 1)
            #expect(e.previousVersion == version, "each frame follows the one before")
            version = e.storeVersion
            for p in e.products { latest[p.uid] = p.price.minorUnits }
            events.append(e)
        }
        #expect(version == final)
        #expect(events.count < count, "\(events.count) frames for \(count) changes: nothing was coalesced")
        // The latest price of each product arrived.
        for k in 0..<10 {
            let last = (0..<count).last { $0 % 10 == k }!
            #expect(latest[products[k].uid] == 10_000 + Int64(last))
        }
    }

    @Test func watchFramesNeverOvertakeAnswersOwedEarlier() throws {
        let daemon = try Daemon()
        let (catalog, products) = try spbProducts(daemon)
        let conn = try RawConnection(path: daemon.socketPath)
        try conn.send(Request(id: 1, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: 0)))
        _ = try watchEvent(conn.receive(), id: 1)
        // On the watching connection: a price change (answered by the
        // commit thread), then reads. The change's own watch frame must not
        // arrive before the SetProduct answer, and the reads come after it.
        let session = try daemon.client().openSession()
        var batch = Framing.frame(Request(id: 10, method: .setProduct(ProductUpdate(productUID: products[0].uid, priceMinorUnits: 4242))).encoded())
        batch += Framing.frame(Request(id: 11, method: .addItem(CartMutation(session: session, storeUID: catalog.store.uid),
                                                                productUID: products[1].uid, quantity: 1)).encoded())
        batch += Framing.frame(Request(id: 12, method: .serverInfo).encoded())
        try conn.send(batch)
        var order: [UInt64] = []
        var sawWatchAfter = false
        while order.count < 3 || !sawWatchAfter {
            let r = try #require(try conn.receive())
            if r.id == 1 {
                #expect(order.contains(10), "a watch frame came before the answer to the change that caused it")
                sawWatchAfter = true
            } else {
                order.append(r.id)
            }
        }
        #expect(order == [10, 11, 12])
    }

    @Test func aWatcherThatNeverReadsIsCutOffAndOthersAreServed() throws {
        let daemon = try Daemon(extraArguments: ["--slow-reader-timeout", "1"])
        let (catalog, products) = try spbProducts(daemon)
        // Watches a store and reads nothing more.
        let lazy = try RawConnection(path: daemon.socketPath)
        try lazy.send(Request(id: 1, method: .watch(selector: .storeUID(catalog.store.uid), sinceVersion: 0)))
        _ = try watchEvent(lazy.receive(), id: 1)
        // Changes stream in; each frame names a product (about 100 bytes).
        let admin = try RawConnection(path: daemon.socketPath)
        let reader = daemon.client()
        let started = Date()
        var cutOff = false
        var round = 0
        while Date().timeIntervalSince(started) < 30 && !cutOff {
            var frames: [UInt8] = []
            for i in 0..<200 {
                let p = products[(round * 200 + i) % products.count]
                frames += Framing.frame(Request(id: UInt64(i + 1), method: .setProduct(
                    ProductUpdate(productUID: p.uid, priceMinorUnits: 20_000 + Int64(round * 200 + i)))).encoded())
            }
            try admin.send(frames)
            for _ in 0..<200 { _ = try #require(try admin.receive()) }
            round += 1
            // Another client is answered as usual meanwhile: promptly is the
            // behaviour, so the bound stays (scaled for slow builds).
            let t0 = Date()
            _ = try reader.store(.cityCode("MSK"))
            let took = Date().timeIntervalSince(t0)
            #expect(took < TestTime.seconds(1), "a read waited \(took) s behind the watcher")
            let stats = try reader.stats()
            cutOff = stats.watchersCutOff >= 1
        }
        #expect(cutOff, "the watcher that never read was not cut off in 30 s")
        #expect(daemon.log.contains("pending answer bytes"))
        // Its connection is closed: reading drains what the kernel held, then
        // the end (or a reset). A read that times out means it is still open.
        var ending = "still open after 100,000 frames"
        draining: for _ in 0..<100_000 {
            do {
                guard try lazy.receive(timeoutMilliseconds: Int32(TestTime.seconds(2) * 1000)) != nil else {
                    ending = "closed"
                    break draining
                }
            } catch let error as Errno where error == .connectionReset {
                ending = "closed"
                break draining
            } catch {
                ending = "not closed: \(error)"
                break draining
            }
        }
        #expect(ending == "closed")
    }
}

@Suite("groser-client watch and stats", .serialized)
struct WatchCommandTests {
    @Test func watchPrintsOneJSONObjectPerChange() throws {
        let daemon = try Daemon()
        let catalog = try daemon.client().store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(catalog.store.departments.first?.shelves.first?.products.first)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.groserClient)
        p.arguments = ["--socket", daemon.socketPath, "--json", "watch", "--city", "SPB", "--count", "2"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Change the price once the watch is open (its first frame counts one watcher).
        let deadline = Date().addingTimeInterval(10)
        while try daemon.client().stats().watchers == 0 && Date() < deadline { usleep(20_000) }
        _ = try daemon.client().setProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: 77_700))
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 2)
        let objects = try lines.map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.first?["initial"] as? Bool == true)
        #expect(objects.first?["storeVersion"] as? String == String(catalog.storeVersion))
        let change = try #require(objects.last?["products"] as? [[String: Any]])
        #expect(change.first?["uid"] as? String == product.uid)
        #expect((change.first?["price"] as? [String: Any])?["minorUnits"] as? String == "77700")
        #expect(objects.last?["previousVersion"] as? String == String(catalog.storeVersion))
    }

    @Test func statsReadsLikeRedisInfo() throws {
        let daemon = try Daemon()
        _ = try daemon.client().store(.cityCode("SPB"))
        let r = try runClient(["stats"], socket: daemon.socketPath)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("# Server\nserver_version:groserd "))
        #expect(r.out.contains("cmdstat_GetStore:calls="))
        #expect(r.out.contains("catalog_products:"))
        #expect(r.out.contains("used_memory_rss:"))
    }
}

extension RawConnection {
    /// The store's version now, read on another connection.
    func store(_ uid: String, _ daemon: Daemon) throws -> UInt64 {
        try daemon.client().store(.storeUID(uid)).storeVersion
    }
}
