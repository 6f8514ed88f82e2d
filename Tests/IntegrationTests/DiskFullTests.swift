import Foundation
import GroserClient
import GroserSystem
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for one test: needs root (or CAP_SYS_ADMIN).
enum Tmpfs {
    @discardableResult
    static func run(_ arguments: [String]) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    static func mount(_ path: String, bytes: Int) -> Bool {
        run(["mount", "-t", "tmpfs", "-o", "size=\(bytes),mode=0700", "tmpfs", path])
    }

    static func unmount(_ path: String) { run(["umount", path]) }
}

/// The data directory on a full disk: writes refused with UNAVAILABLE,
/// nothing acknowledged lost, reads go on, writes resume when space returns.
@Suite("disk full", .serialized)
struct DiskFullTests {
    /// Fills the file system under `path` with one file until it refuses.
    static func fill(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TestFailure("cannot create \(path): errno \(errno)") }
        defer { close(fd) }
        var chunk = 1 << 20
        let zeros = [UInt8](repeating: 7, count: chunk)
        while chunk > 0 {
            let n = zeros.withUnsafeBytes { write(fd, $0.baseAddress!, chunk) }
            if n < 0 {
                guard errno == ENOSPC else { throw TestFailure("filling \(path): errno \(errno)") }
                chunk /= 2
            }
        }
        fsync(fd)
    }

    @Test func aFullDiskRefusesCartWritesKeepsWhatWasAcknowledgedAndWritesResumeWhenSpaceReturns() throws {
        try Privileged.requireTmpfs()
        let dir = Daemon.makeTemporaryDirectory()
        let data = dir + "/data"
        #expect(mkdir(data, 0o700) == 0)
        try #require(Tmpfs.mount(data, bytes: 8 << 20), "mount a tmpfs at \(data)")
        defer {
            Tmpfs.unmount(data)
            try? FileManager.default.removeItem(atPath: dir)
        }
        // Small log segments: 64 KiB of zeros ahead instead of 1 MiB, so the
        // space written ahead runs out after a few hundred adds.
        let daemon = try Daemon(directory: dir, extraArguments: ["--max-quantity", "100000", "--log-segment-bytes", "65536"])
        let client = daemon.client(timeout: 10)
        let store = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let session = try client.openSession()
        let cart = CartMutation(session: session, storeUID: store.uid)
        var acknowledged = try client.addItem(cart, productUID: product.uid, quantity: 2).lines[0].quantity
        #expect(acknowledged == 2)

        try Self.fill(data + "/filler")
        var refusal: GroserError?
        for _ in 0..<5000 {
            do {
                acknowledged = try client.addItem(cart, productUID: product.uid).lines[0].quantity
            } catch {
                refusal = error
                break
            }
        }
        let error = try #require(refusal, "5000 adds on a full disk all succeeded")
        #expect(error.status?.code == .unavailable, "\(error)")
        let message = error.status?.message ?? ""
        #expect(message.contains("could not be saved") && message.hasSuffix("."), "one readable sentence: \(message)")

        // Reads go on; the refused add changed nothing.
        #expect(try client.cart(session: session, storeUID: store.uid).lines.first?.quantity == acknowledged)
        #expect(try client.store(.cityCode("MSK")).store.uid.isEmpty == false)
        do {
            _ = try client.addItem(cart, productUID: product.uid)
            Issue.record("an add succeeded while the disk was still full")
        } catch {
            #expect(error.status?.code == .unavailable, "\(error)")
        }

        // Space returns: the next add goes through without a restart.
        try Files.remove(data + "/filler")
        acknowledged = try client.addItem(cart, productUID: product.uid).lines[0].quantity
        #expect(try client.cart(session: session, storeUID: store.uid).lines.first?.quantity == acknowledged)

        #expect(daemon.log.contains("could not be made durable"), "the refusal is logged")

        // And everything acknowledged survives a crash.
        daemon.killHard()
        try daemon.start()
        #expect(try daemon.client().cart(session: session, storeUID: store.uid).lines.first?.quantity == acknowledged)
        daemon.terminate()
    }
}
