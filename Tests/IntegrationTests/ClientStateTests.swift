import Foundation
import GroserClient
import GroserSystem
import Testing

/// groser-client's saved state through the real binaries: sessions per
/// daemon, and files it cannot read, parse or write, which it reports and
/// leaves alone.
@Suite("the client's saved state", .serialized)
struct ClientStateTests {
    let a: Daemon
    let configHome: String
    var file: String { configHome + "/groser/client.conf" }
    /// In-stock products of SPB's default store (the same in every daemon:
    /// each seeds the same sample catalog).
    let products: [String]

    init() throws {
        a = try Daemon()
        configHome = a.directory + "/config"
        let store = try a.client().store(.cityCode("SPB"), includeProducts: true)
        products = store.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }.map(\.uid)
    }

    /// groser-client with daemon A as its default socket ($GROSER_SOCKET).
    func client(_ arguments: [String], input: String? = nil, environment: [String: String] = [:],
                as uid: UInt32? = nil, binary: String = Daemon.groserClient, directory: String? = nil) throws -> ProgramResult {
        var env = minimalEnvironment(["GROSER_SOCKET": a.socketPath, "XDG_CONFIG_HOME": configHome])
        env.merge(environment) { $1 }
        return try runProgram(binary, arguments, environment: env, as: uid, directory: directory, input: input)
    }

    static let card = "4111 1111 1111 1111\n123\n"
    static let checkout = ["checkout", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin"]

    @Test("a cart on a second daemon (--socket) leaves the first daemon's cart and orders reachable")
    func eachDaemonKeepsItsSession() throws {
        let b = try Daemon()
        #expect(try client(["set-city", "SPB"]).status == 0)
        let added = try client(["cart", "add", products[0]])
        #expect(added.status == 0, "\(added.err)")
        let paid = try client(Self.checkout, input: Self.card)
        #expect(paid.status == 0, "\(paid.err)")
        let number = try #require(paid.out.split(separator: " ").dropFirst().first.map(String.init))
        #expect(number.hasPrefix("G-"), "\(paid.out)")
        #expect(try client(["cart", "add", products[1]]).status == 0)

        // The issue: this replaced the saved token.
        let other = try client(["--socket", b.socketPath, "cart", "add", products[2]])
        #expect(other.status == 0, "\(other.err)")
        #expect(other.out.contains(products[2]) && !other.out.contains(products[1]))

        let back = try client(["cart"])
        #expect(back.status == 0, "\(back.err)")
        #expect(back.out.contains(products[1]), "the first daemon's cart is still there: \(back.out)")
        #expect(!back.out.contains(products[2]))
        let orders = try client(["orders"])
        #expect(orders.status == 0 && orders.out.contains(number), "\(orders.out)\(orders.err)")
        #expect(try client(["--socket", b.socketPath, "orders"]).out == "No orders yet.\n")
        #expect(try client(["--socket", b.socketPath, "cart"]).out.contains(products[2]))

        let saved = try ClientSettings.load(from: file)
        #expect(Set(saved.sessions.keys) == [a.socketPath, b.socketPath])
        #expect(saved.sessions[a.socketPath] != saved.sessions[b.socketPath])
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains("city=SPB\n") && text.contains("session.\(a.socketPath)=") && text.contains("session.\(b.socketPath)="))
    }

    @Test("an old file's plain session= line is used for the default socket and never overwritten")
    func legacySessionLine() throws {
        let b = try Daemon()
        let library = a.client()
        let token = try library.openSession()
        let storeUID = try library.store(.cityCode("SPB")).store.uid
        _ = try library.addItem(CartMutation(session: token, storeUID: storeUID), productUID: products[3])
        try FileManager.default.createDirectory(atPath: configHome + "/groser", withIntermediateDirectories: true)
        let old = "# groser-client settings\ncity=SPB\nsession=\(token)\n"
        #expect(FileManager.default.createFile(atPath: file, contents: Data(old.utf8)))

        let mine = try client(["cart"])
        #expect(mine.status == 0 && mine.out.contains(products[3]), "\(mine.out)\(mine.err)")
        let named = try client(["--socket", a.socketPath, "cart"])
        #expect(named.out.contains(products[3]), "the default socket named explicitly is still the default socket")
        let elsewhere = try client(["--socket", b.socketPath, "cart"])
        #expect(elsewhere.status == 0 && elsewhere.out.contains("is empty"), "\(elsewhere.out)\(elsewhere.err)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.hasPrefix(old), "the old lines are kept as they were: \(text)")
        #expect(text.contains("session.\(b.socketPath)="))
        #expect(try client(["cart"]).out.contains(products[3]))
    }

    @Test("a settings file that cannot be read is an error naming it, exit 1, and the file is left as it is")
    func unreadableFile() throws {
        // Mode 000 stops anyone but root: run the client as another user when root.
        let user: UInt32? = canRunAsOtherUsers ? 47_214 : nil
        let bins = try PortableBinaries()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        let daemon = try Daemon(directory: dir, extraArguments: user.map { ["--socket-group", "\($0)"] } ?? [])
        let home = bins.directory + "/config"
        try FileManager.default.createDirectory(atPath: home + "/groser", withIntermediateDirectories: true)
        let path = home + "/groser/client.conf"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("city=MSK\nsession=abc\n".utf8)))
        chmod(path, 0o000)
        if let user { for p in [home, home + "/groser", path] { chown(p, user, user) } }
        let env = ["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": home]

        for args in [["get-store"], ["set-city", "SPB"], ["cart", "add", products[0], "--city", "SPB"], ["orders"]] {
            let r = try client(args, environment: env, as: user, binary: bins.groserClient)
            #expect(r.status == 1, "\(args): \(r.err)")
            #expect(r.err.contains("cannot read the settings file \(path): Permission denied; it was left as it is"), "\(args): \(r.err)")
        }
        let st = try #require(fileStatus(path))
        #expect(st.st_mode & 0o777 == 0, "the mode is unchanged")
        chmod(path, 0o600)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "city=MSK\nsession=abc\n")

        // Something that is not a file stops root too.
        try FileManager.default.createDirectory(atPath: a.directory + "/dirconfig/groser/client.conf", withIntermediateDirectories: true)
        let r = try client(["get-store"], environment: ["XDG_CONFIG_HOME": a.directory + "/dirconfig"])
        #expect(r.status == 1)
        #expect(r.err.contains("cannot read the settings file \(a.directory)/dirconfig/groser/client.conf: Is a directory"), "\(r.err)")
    }

    @Test("a garbage settings file is an error naming the file and the line, not \"none saved\"", arguments: [
        ("garbage\n", 1), ("city=SPB\n\u{1B}[2J\u{1B}]0;x\u{07}\n", 2), ("city=SPB\ncity=KZN\n", 2),
    ])
    func malformedFile(text: String, line: Int) throws {
        try FileManager.default.createDirectory(atPath: configHome + "/groser", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: file, contents: Data(text.utf8)))
        for args in [["get-store"], ["set-city", "KZN"], ["cart"], ["cart", "add", products[0], "--city", "SPB"], ["orders"]] {
            let r = try client(args)
            #expect(r.status == 1, "\(args): \(r.err)")
            #expect(r.err.contains("the settings file \(file), line \(line): "), "\(args): \(r.err)")
            #expect(!r.err.contains("none saved") && !r.err.contains("connection failed"))
            #expect(!r.errBytes.contains(0x1B) && !r.errBytes.contains(0x07), "the file's bytes are escaped too")
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == text, "the file was left as it is")
    }

    @Test("a failed save says that saving failed and where, not \"connection failed\"")
    func failedSave() throws {
        // A directory its owner may not write to; root may, so run as another user.
        let user: UInt32? = canRunAsOtherUsers ? 47_214 : nil
        let bins = try PortableBinaries()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        let daemon = try Daemon(directory: dir, extraArguments: user.map { ["--socket-group", "\($0)"] } ?? [])
        let home = bins.directory + "/config"
        try FileManager.default.createDirectory(atPath: home + "/groser", withIntermediateDirectories: true)
        let path = home + "/groser/client.conf"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("city=MSK\n".utf8)))
        chmod(path, 0o600)
        if let user { for p in [home, home + "/groser", path] { chown(p, user, user) } }
        chmod(home + "/groser", 0o500)
        defer { chmod(home + "/groser", 0o700) }
        let env = ["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": home]

        for args in [["set-city", "SPB"], ["cart", "add", products[0]]] {
            let r = try client(args, environment: env, as: user, binary: bins.groserClient)
            #expect(r.status == 1, "\(args): \(r.out)\(r.err)")
            #expect(r.err.contains("saving the settings failed: cannot write \(path): Permission denied"), "\(args): \(r.err)")
            #expect(!r.err.contains("connection failed"))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "city=MSK\n")
    }

    @Test("a relative XDG_CONFIG_HOME is ignored, as the XDG specification says")
    func relativeConfigHome() throws {
        let home = a.directory + "/home", cwd = a.directory + "/cwd"
        for d in [home, cwd] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        let r = try client(["set-city", "SPB"], environment: ["XDG_CONFIG_HOME": "relative/config", "HOME": home], directory: cwd)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("saved in \(home)/.config/groser/client.conf"), "\(r.out)")
        #expect(try ClientSettings.load(from: home + "/.config/groser/client.conf").cityCode == "SPB")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cwd).isEmpty, "nothing was written under the working directory")
    }
}
