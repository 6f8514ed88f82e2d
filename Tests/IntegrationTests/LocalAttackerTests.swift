import Foundation
import GroserClient
import GroserSystem
import Testing

/// Values of `sql` (one per line) from the database at `path`, through the
/// sqlite3 shell, as someone with a copy of the file would read them.
func sqliteValues(_ path: String, _ sql: String) throws -> [String] {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    p.arguments = ["-batch", "-noheader", "-list", path, sql]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw TestFailure("sqlite3 failed on \(sql)") }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

private func modeOf(_ path: String) -> mode_t {
    var st = stat()
    return stat(path, &st) == 0 ? st.st_mode & 0o777 : 0
}

/// The local-attacker issue's daemon-side items, through a real groserd:
/// what it keeps on disk, what any connecting user can make it do, and the
/// signals and storage surprises it must survive.
@Suite("local attacker: groserd", .serialized)
struct LocalAttackerTests {
    static let visa = "4111 1111 1111 1111"

    func checkoutDetails(_ session: String, store: String, version: UInt64, address: String = "Невский пр., 1",
                         holder: String = "IVAN PETROV", key: String = "") -> CheckoutDetails {
        CheckoutDetails(session: session, storeUID: store, expectedVersion: version, deliveryAddress: address,
                        card: PaymentCard(number: Self.visa, expiryMonth: 12, expiryYear: 2099, cvc: "123", holderName: holder),
                        idempotencyKey: key)
    }

    func inStock(_ client: GroserClient) throws -> (store: String, products: [Product]) {
        let store = try client.store(.cityCode("SPB"), includeProducts: true)
        return (store.store.uid, store.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock })
    }

    // MARK: Secrets at rest

    @Test func everyFileInTheDataDirectoryIs0600AndTheDirectory0700() throws {
        let dir = Daemon.makeTemporaryDirectory()
        // A data directory left group- and world-readable by hand or an older version.
        mkdir(dir + "/data", 0o755)
        chmod(dir + "/data", 0o755)
        let daemon = try Daemon(directory: dir)
        let client = daemon.client()
        let (store, products) = try inStock(client)
        let s = try client.openSession()
        let c = try client.addItem(CartMutation(session: s, storeUID: store), productUID: products[0].uid)
        _ = try client.checkout(checkoutDetails(s, store: store, version: c.version, key: "pay"))
        #expect(modeOf(daemon.dataDirectory) == 0o700, "data directory mode \(String(modeOf(daemon.dataDirectory), radix: 8))")
        let names = try FileManager.default.contentsOfDirectory(atPath: daemon.dataDirectory)
        #expect(names.contains("groser.sqlite3") && names.contains("groser.sqlite3-wal"), "\(names)")
        let files = filesUnder(daemon.dataDirectory)
        #expect(files.contains { $0.contains("/customers/shard-0/log-") }, "the customer log is checked too: \(files)")
        for file in files {
            let mode = modeOf(file)
            #expect(mode == 0o600, "\(file) has mode \(String(mode, radix: 8))")
        }
        for dir in directoriesUnder(daemon.dataDirectory) {
            #expect(modeOf(dir) == 0o700, "\(dir) has mode \(String(modeOf(dir), radix: 8))")
        }
    }

    @Test func noValueStoredInTheDatabaseWorksAsASessionToken() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let (store, products) = try inStock(client)
        let token = try client.openSession()
        let c = try client.addItem(CartMutation(session: token, storeUID: store, idempotencyKey: "add-1"), productUID: products[0].uid)
        _ = try client.checkout(checkoutDetails(token, store: store, version: c.version, key: "pay-1"))
        _ = try client.addItem(CartMutation(session: token, storeUID: store), productUID: products[1].uid)
        let db = daemon.dataDirectory + "/groser.sqlite3"

        // Every value of every table that refers to customers.
        var values: Set<String> = []
        for table in try sqliteValues(db, "SELECT name FROM sqlite_master WHERE type = 'table'")
        where !["cities", "stores", "departments", "shelves", "products"].contains(table) {
            let columns = try sqliteValues(db, "SELECT name FROM pragma_table_info('\(table)')")
            for column in columns {
                values.formUnion(try sqliteValues(db, "SELECT DISTINCT CAST(\"\(column)\" AS TEXT) FROM \"\(table)\""))
            }
        }
        #expect(values.count > 10, "the dump found the session's rows: \(values.count) values")
        #expect(!values.contains(token), "the token itself is stored")
        var tried = 0
        for value in values where !value.isEmpty && value.utf8.count <= 64 {
            tried += 1
            expectStatus(.unauthenticated) { _ = try client.cart(session: value, storeUID: store) }
        }
        #expect(tried > 5)
        // The token still works, and its bytes are in no file of the data directory.
        #expect(try client.cart(session: token, storeUID: store).lines.count == 1)
        #expect(try client.orders(session: token).count == 1)
        for file in filesUnder(daemon.dataDirectory) {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            #expect(data.range(of: Data(token.utf8)) == nil, "the token is in \(file)")
        }
    }

    // MARK: Input any connecting user can send

    @Test func countsThatWouldOverflowAreRefusedAndTheDaemonLives() throws {
        let daemon = try Daemon(extraArguments: ["--max-quantity", "2000000000"])
        let client = daemon.client()
        let (store, products) = try inStock(client)
        let s = try client.openSession()
        let cart = CartMutation(session: s, storeUID: store)
        _ = try client.addItem(cart, productUID: products[0].uid, quantity: 2_000_000_000)
        _ = try client.addItem(cart, productUID: products[1].uid, quantity: 2_000_000_000)
        expectStatus(.failedPrecondition, containing: "items") {
            _ = try client.addItem(cart, productUID: products[2].uid, quantity: 2_000_000_000)
        }
        expectStatus(.failedPrecondition) {
            _ = try client.addItem(cart, productUID: products[0].uid, quantity: 2_000_000_000)
        }
        let now = try client.cart(session: s, storeUID: store)
        #expect(now.lines.count == 2 && now.itemCount == 4_000_000_000, "a refused change changed nothing")
        #expect(daemon.process.isRunning)
        #expect(try client.serverInfo().methods.count > 0)
    }

    @Test func overlongStringsAreRefusedNamingTheField() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let (store, products) = try inStock(client)
        let s = try client.openSession()
        let c = try client.addItem(CartMutation(session: s, storeUID: store), productUID: products[0].uid)
        let cases: [(String, CheckoutDetails)] = [
            ("delivery_address", checkoutDetails(s, store: store, version: c.version, address: String(repeating: "д", count: 4096))),
            ("card.holder_name", checkoutDetails(s, store: store, version: c.version, holder: String(repeating: "A", count: 300))),
            ("idempotency_key", checkoutDetails(s, store: store, version: c.version, key: String(repeating: "k", count: 129))),
        ]
        for (field, details) in cases {
            expectStatus(.invalidArgument, containing: field) { _ = try client.checkout(details) }
        }
        expectStatus(.invalidArgument, containing: "product_uid") {
            _ = try client.addItem(CartMutation(session: s, storeUID: store), productUID: String(repeating: "p", count: 1000))
        }
        expectStatus(.invalidArgument, containing: "session") {
            _ = try client.cart(session: String(repeating: "0", count: 65), storeUID: store)
        }
        // At the limit is accepted.
        let order = try client.checkout(checkoutDetails(s, store: store, version: c.version,
                                                        address: String(repeating: "a", count: 1024),
                                                        key: String(repeating: "k", count: 128)))
        #expect(order.deliveryAddress.utf8.count == 1024)
        #expect(try client.orders(session: s).count == 1, "no refused checkout left an order")
    }

    // MARK: Signals

    @Test func hangupAndUserSignalsDoNotKillTheDaemonAndQuitStopsItGracefully() throws {
        let daemon = try Daemon()
        let pid = daemon.process.processIdentifier
        for sig in [SIGHUP, SIGUSR1, SIGUSR2] {
            kill(pid, sig)
        }
        // Each signal handled shows as its log line; a killed groserd never writes them.
        let handled = eventually {
            let log = daemon.log
            return ["SIGHUP", "SIGUSR1", "SIGUSR2"].allSatisfy { log.contains("received \($0); ignored") } || !daemon.process.isRunning
        }
        #expect(handled, "no log line for each signal: \(daemon.log)")
        #expect(daemon.process.isRunning, "a signal killed groserd: \(daemon.log)")
        #expect(try daemon.client().serverInfo().methods.count > 0)
        for name in ["SIGHUP", "SIGUSR1", "SIGUSR2"] {
            #expect(daemon.log.contains("received \(name); ignored"), "\(daemon.log)")
        }
        kill(pid, SIGQUIT)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationReason == .exit && daemon.process.terminationStatus == 0, "\(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath), "the graceful path removes the socket")
    }

    // MARK: Storage surprises

    @Test func aReadOnlyDatabaseIsRefusedAtStart() throws {
        // Root writes any file: only a read-only file system stops it, so
        // root needs a tmpfs; another user is stopped by a 0400 file.
        if getuid() == 0 { try Privileged.requireTmpfs() }
        let daemon = try Daemon()
        let data = daemon.dataDirectory
        #expect(daemon.terminate() == 0)
        let db = data + "/groser.sqlite3"
        var mounted = false
        if getuid() == 0 {
            // Root may write any file; a read-only file system stops even root.
            let copy = try Data(contentsOf: URL(fileURLWithPath: db))
            _ = try FileManager.default.contentsOfDirectory(atPath: data).map { unlink(data + "/" + $0) }
            #expect(mount("tmpfs", data, "tmpfs", 0, "size=64m,mode=0700") == 0)
            mounted = true
            try copy.write(to: URL(fileURLWithPath: db))
            chmod(db, 0o600)
            #expect(mount("tmpfs", data, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), "size=64m,mode=0700") == 0)
        } else {
            chmod(db, 0o400)
        }
        defer {
            if mounted { umount(data) }
        }
        let p = Daemon.launch(socket: daemon.socketPath, data: data, stderrPath: daemon.stderrPath)
        p.waitUntilExit()
        #expect(p.terminationStatus == 1, "\(daemon.log)")
        let last = daemon.log.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.contains("cannot be written") && last.contains(data), "one clear line: \(last)")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath), "it never listened")
    }

    @Test func aDatabaseDeletedWhileRunningStopsWritesWithAClearErrorAndReadsGoOn() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let (store, products) = try inStock(client)
        let s = try client.openSession()
        let cart = CartMutation(session: s, storeUID: store)
        let c = try client.addItem(cart, productUID: products[0].uid)
        for suffix in ["", "-wal", "-shm"] { unlink(daemon.dataDirectory + "/groser.sqlite3" + suffix) }
        // Orders and stock are in the database: checkout and SetProduct stop.
        expectStatus(.unavailable, containing: "deleted") {
            _ = try client.checkout(checkoutDetails(s, store: store, version: c.version, key: "pay"))
        }
        expectStatus(.unavailable, containing: "deleted") {
            _ = try client.setProduct(ProductUpdate(productUID: products[1].uid, stock: 3))
        }
        #expect(try client.store(.cityCode("SPB")).store.uid == store, "catalog reads go on")
        #expect(daemon.log.contains("deleted or replaced"), "\(daemon.log)")
        #expect(daemon.process.isRunning)
    }
}
