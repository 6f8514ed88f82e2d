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

let canSwitchUsers = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

@Suite("socket permissions and the admin check", .serialized, .enabled(if: canSwitchUsers, "needs root and setpriv"))
struct PermissionTests {
    /// A daemon whose directory other users may traverse.
    func daemon(_ extra: [String]) throws -> Daemon {
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
        let d = try daemon([])
        let c = d.client()
        let store = try c.store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(store.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let alice = try c.openSession(), mallory = try c.openSession()
        _ = try c.addItem(CartMutation(session: alice, storeUID: store.store.uid), productUID: product.uid, quantity: 3)
        // Mallory knows Alice's token's first half (the indexed selector) but not the rest.
        let forged = String(alice.prefix(8)) + String(mallory.dropFirst(8))
        for token in [forged, mallory] {
            let theirs = try? c.cart(session: token, storeUID: store.store.uid)
            #expect(theirs?.lines.isEmpty ?? true)
            _ = try? c.clearCart(CartMutation(session: token, storeUID: store.store.uid))
            #expect((try? c.orders(session: token))?.isEmpty ?? true)
        }
        #expect(try c.cart(session: alice, storeUID: store.store.uid).lines.first?.quantity == 3)
    }
}
