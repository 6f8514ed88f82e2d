import Foundation
import GroserClient
import Testing

/// Runs groser-client as `nobody` (uid 65534, group nogroup) with setpriv.
func runClientAsNobody(_ arguments: [String], socket: String) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    p.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", Daemon.groserClient] + arguments
    p.environment = ["GROSER_SOCKET": socket, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"]
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

@Suite("socket permissions and the admin check", .serialized)
struct PermissionTests {
    /// A daemon whose directory other users may traverse, for a test that
    /// runs groser-client as nobody (skipped, or failed under
    /// GROSER_REQUIRE_PRIVILEGED=1, where that cannot be done).
    func daemon(_ extra: [String]) throws -> Daemon {
        try Privileged.requireOtherUsers()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        return try Daemon(directory: dir, extraArguments: extra)
    }

    @Test func aUserOutsideTheSocketGroupCannotConnect() throws {
        let d = try daemon([])
        let r = try runClientAsNobody(["cities"], socket: d.socketPath)
        #expect(r.status == 1)
        #expect(r.err.contains("cannot connect to \(d.socketPath): Permission denied: this user may not use that socket"), "\(r.err)")
        #expect(!r.err.contains("is groserd running"), "groserd is running; EACCES is no sign it is not")
    }

    @Test func theSocketGroupMayReadButNotChangeTheCatalog() throws {
        let d = try daemon(["--socket-group", "nogroup"])
        var st = stat()
        #expect(stat(d.socketPath, &st) == 0 && st.st_gid == 65534 && st.st_mode & 0o777 == 0o660)
        let read = try runClientAsNobody(["cities"], socket: d.socketPath)
        #expect(read.status == 0, "\(read.err)")
        let product = try #require(try d.client().store(.cityCode("SPB"), includeProducts: true)
            .store.departments.first?.shelves.first?.products.first)
        let write = try runClientAsNobody(["admin", "set-product", product.uid, "--price", "1.00"], socket: d.socketPath)
        #expect(write.status == 64 + 7, "PERMISSION_DENIED: \(write.err)")
        #expect(write.err.contains("PERMISSION_DENIED"))
        let unchanged = try d.client().store(.cityCode("SPB"), includeProducts: true).store.departments.first?.shelves.first?.products.first
        #expect(unchanged?.price == product.price)
        // The daemon's own user (root here) may.
        let own = try runClient(["admin", "set-product", product.uid, "--price", "1.00"], socket: d.socketPath)
        #expect(own.status == 0, "\(own.err)")
    }

    @Test func membersOfTheAdminGroupMayChangeTheCatalog() throws {
        let d = try daemon(["--socket-group", "nogroup", "--admin-group", "nogroup"])
        let product = try #require(try d.client().store(.cityCode("MSK"), includeProducts: true)
            .store.departments.first?.shelves.first?.products.first)
        let r = try runClientAsNobody(["admin", "set-product", product.uid, "--stock", "7", "--json"], socket: d.socketPath)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("\"stock\": 7"))
    }

    @Test func oneSessionCannotTouchAnothersCart() throws {
        let d = try Daemon()
        let c = d.client()
        let store = try c.store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(store.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let alice = try c.openSession(), mallory = try c.openSession()
        _ = try c.addItem(CartMutation(session: alice, storeUID: store.store.uid), productUID: product.uid, quantity: 3)
        // Mallory knows Alice's token's first half but not the rest.
        let half = alice.count / 2
        let forged = String(alice.prefix(half)) + String(mallory.dropFirst(half))
        // The forged token is no session: every use of it is UNAUTHENTICATED.
        func expectUnauthenticated(_ what: String, _ body: () throws -> Void) {
            do {
                try body()
                Issue.record("\(what) with a forged token was answered OK")
            } catch let error as GroserError {
                #expect(error.status?.code == .unauthenticated, "\(what) with a forged token: \(error)")
            } catch {
                Issue.record("\(what) with a forged token: \(error)")
            }
        }
        expectUnauthenticated("GetCart") { _ = try c.cart(session: forged, storeUID: store.store.uid) }
        expectUnauthenticated("ClearCart") { _ = try c.clearCart(CartMutation(session: forged, storeUID: store.store.uid)) }
        expectUnauthenticated("ListOrders") { _ = try c.orders(session: forged) }
        // Mallory's own session sees only its own, empty, cart and orders.
        #expect(try c.cart(session: mallory, storeUID: store.store.uid).lines.isEmpty)
        _ = try c.clearCart(CartMutation(session: mallory, storeUID: store.store.uid))
        #expect(try c.orders(session: mallory).isEmpty)
        #expect(try c.cart(session: alice, storeUID: store.store.uid).lines.first?.quantity == 3)
    }
}
