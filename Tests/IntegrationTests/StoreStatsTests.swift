import Foundation
import GroserClient
import GroserSystem
import Testing

/// Stats' store fields (`store`, `store_state`, `store_round_trip`,
/// `store_conflicts`, `store_reconnects`) on a real groserd, with PostgreSQL
/// stopped and started under it.
@Suite("stats tells the store's state", .serialized,
       .enabled(if: clusterConninfo != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
struct PostgresStoreStatsTests {
    /// The first product in stock of SPB's store, and the store's uid.
    private func product(_ client: GroserClient) throws -> (storeUID: String, productUID: String) {
        let spb = try client.store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(spb.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        return (spb.store.uid, product.uid)
    }

    @Test func aPostgresDaemonSaysPostgresqlOkAndCountsRoundTrips() throws {
        let database = try ScratchDatabase()
        let host = try Daemon(extraArguments: ["--store", database.conninfo])
        let client = host.client()
        let (storeUID, productUID) = try product(client)
        let s = try client.openSession()
        for i in 0..<5 {
            _ = try client.addItem(CartMutation(session: s, storeUID: storeUID, idempotencyKey: "add-\(i)"), productUID: productUID)
        }
        let stats = try client.stats()
        #expect(stats.store == "postgresql")
        #expect(stats.storeState == "ok")
        // Each batch's read pipeline is one; the follower reads the version every second.
        #expect(stats.storeRoundTrip.count >= 5, "\(stats.storeRoundTrip)")
        #expect(stats.storeRoundTrip.max > 0 && stats.storeRoundTrip.p50 <= stats.storeRoundTrip.max)
        #expect(stats.storeReconnects == 0)
        // The batches' transactions are fsync's, with PostgreSQL.
        #expect(stats.commitBatches >= 5 && stats.fsync.count == stats.commitBatches)

        let human = try runClient(["stats"], socket: host.socketPath)
        #expect(human.status == 0, "\(human.err)")
        #expect(human.out.contains("\n# Store\nstore:postgresql\nstore_state:ok\nstore_round_trips:"), "\(human.out)")
        #expect(human.out.contains("store_round_trip_usec:p50=") && human.out.contains("store_reconnects:0\n"))
        let json = try runClient(["stats", "--json"], socket: host.socketPath)
        #expect(json.status == 0, "\(json.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect(object["store"] as? String == "postgresql")
        #expect(object["storeState"] as? String == "ok")
        let roundTrip = try #require(object["storeRoundTrip"] as? [String: Any], "\(json.out)")
        #expect(UInt64(roundTrip["count"] as? String ?? "") ?? 0 >= 5)
        let prometheus = try runClient(["stats", "--prometheus"], socket: host.socketPath)
        #expect(prometheus.out.contains("groserd_store_up{store=\"postgresql\"} 1\n"))
        #expect(prometheus.out.contains("groserd_store_round_trip_seconds_count "))
    }

    @Test func anOutageShowsAsUnavailableUntilARoundTripSucceeds() throws {
        // A cluster of this test's own: stopping the shared one would fail the other tests.
        let dir = "/tmp/groser-pg-stats-\(UInt32.random(in: 0...UInt32.max))"
        try pgCluster("start", dir)
        defer { _ = try? pgCluster("stop", dir) }
        let conninfo = try pgCluster("conninfo", dir)
        let host = try Daemon(extraArguments: ["--store", conninfo])
        let client = host.client(timeout: 10)
        let (storeUID, productUID) = try product(client)
        let s = try client.openSession()
        let add = { (key: String) throws(GroserError) in
            _ = try client.addItem(CartMutation(session: s, storeUID: storeUID, idempotencyKey: key), productUID: productUID)
        }
        try add("before")
        #expect(try client.stats().storeState == "ok")

        try pgCluster("pause", dir)
        let before = Date()
        do {
            try add("during")
            Issue.record("an add was acknowledged while PostgreSQL was stopped")
        } catch {
            #expect(error.status?.code == .unavailable, "\(error)")
        }
        // Stats is answered from memory meanwhile.
        let down = try client.stats()
        #expect(down.store == "postgresql")
        #expect(down.storeState.hasPrefix("unavailable since "), "\(down.storeState)")
        // "unavailable since 2026-12-06T02:47:29.123Z: <libpq's reason>"
        let parts = down.storeState.dropFirst("unavailable since ".count).split(separator: " ", maxSplits: 1)
        let since = String(parts.first ?? "")
        #expect(since.count == 25 && since.hasSuffix("Z:"), "\(down.storeState)")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let at = try #require(formatter.date(from: String(since.dropLast())), "\(down.storeState)")
        #expect(at > before.addingTimeInterval(-5) && at < Date().addingTimeInterval(1), "\(at) vs \(before)")
        #expect(parts.count == 2 && !parts[1].isEmpty, "no reason: \(down.storeState)")
        let human = try runClient(["stats"], socket: host.socketPath)
        #expect(human.out.contains("\nstore_state:unavailable since "), "\(human.out)")

        try pgCluster("resume", dir)
        // The shard that failed connects again at its next batch.
        let deadline = Date().addingTimeInterval(30)
        while true {
            do {
                try add("after")
                break
            } catch {
                #expect(error.status?.code == .unavailable, "\(error)")
                guard Date() < deadline else { throw TestFailure("writes did not resume within 30 s: \(error)") }
                usleep(100_000)
            }
        }
        let up = try client.stats()
        #expect(up.storeState == "ok", "\(up.storeState)")
        #expect(up.storeReconnects >= 1)
        #expect(try client.cart(session: s, storeUID: storeUID).lines.first?.quantity == 2, "the add refused during the outage was not applied")
    }
}

@Suite("stats tells the store's state: SQLite")
struct SQLiteStoreStatsTests {
    @Test func aSQLiteDaemonSaysSqliteOk() throws {
        let host = try Daemon()
        let client = host.client()
        let s = try client.openSession()
        let spb = try client.store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(spb.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        _ = try client.addItem(CartMutation(session: s, storeUID: spb.store.uid), productUID: product.uid)
        let stats = try client.stats()
        #expect(stats.store == "sqlite")
        #expect(stats.storeState == "ok")
        #expect(stats.storeRoundTrip.count == 0 && stats.storeConflicts == 0 && stats.storeReconnects == 0)
        #expect(stats.commitBatches >= 1 && stats.fsync.count == stats.commitBatches)
        let human = try runClient(["stats"], socket: host.socketPath)
        #expect(human.out.contains("\n# Store\nstore:sqlite\nstore_state:ok\n\n"), "\(human.out)")
        #expect(!human.out.contains("store_round_trip"))
        let prometheus = try runClient(["stats", "--prometheus"], socket: host.socketPath)
        #expect(prometheus.out.contains("groserd_store_up{store=\"sqlite\"} 1\n"))
    }
}
