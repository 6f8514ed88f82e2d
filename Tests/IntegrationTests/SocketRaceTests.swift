import Foundation
import GroserClient
import GroserSystem
import Testing

/// Issue 32 §1: another user's fake groserd must never hear a client. The
/// client checks and connects through one open descriptor of the default
/// directory (a rename cannot swap it in between), reads who answers
/// (SO_PEERCRED) and sends nothing to a server that is not run by this
/// user, root or the uid named with --expect-server-uid; a missing default
/// directory means no daemon runs; a relative XDG_RUNTIME_DIR is ignored;
/// checkout can keep the holder and address out of `ps`.
@Suite("the socket race and who answers", .serialized)
struct SocketRaceTests {
    /// A victim with no password entry, different from SocketDirectoryTests'
    /// so the two suites never share a /tmp/groser-<uid>.
    static let victim: UInt32 = 47_215
    static let attacker: UInt32 = 65_534
    static let card = "4111 1111 1111 1111\n123\n"
    static let script = repositoryRoot + "/tools/attack-socket-race"

    /// tools/attack-socket-race's fake groserd, run as `uid` on `socket`: it
    /// records each connection's pid and the bytes the first read got.
    final class FakeServer {
        let record: String
        let process: Background

        init(socket: String, in bins: PortableBinaries, as uid: UInt32) throws {
            let script = bins.directory + "/attack-socket-race"
            try FileManager.default.copyItem(atPath: SocketRaceTests.script, toPath: script)
            chmod(script, 0o755)
            record = bins.directory + "/record"
            #expect(FileManager.default.createFile(atPath: record, contents: nil))
            chmod(record, 0o666)
            process = try Background("/usr/bin/python3", [script, "--fake-server", socket, "--record", record],
                                     environment: minimalEnvironment(), as: uid)
        }

        /// The bytes each connection sent, in order.
        var connections: [Int] {
            let text = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
        }

        deinit { process.terminate() }
    }

    @Test("a server run by another uid hears nothing, from groser-client or the library; --expect-server-uid names it")
    func anotherUsersServerHearsNothing() async throws {
        try Privileged.requireOtherUsers()
        let bins = try PortableBinaries()
        // A sticky directory every user may write to, as /tmp: nobody's own
        // socket there, at a path the victim names.
        let shared = bins.directory + "/shared"
        mkdir(shared, 0o700)
        chmod(shared, 0o1777)
        let socket = shared + "/g.sock"
        let fake = try FakeServer(socket: socket, in: bins, as: Self.attacker)
        #expect(eventually { Files.isSocket(socket) || !fake.process.process.isRunning }, "the fake server did not listen")
        let env = minimalEnvironment()

        let checkout = try runProgram(bins.groserClient, [
            "--socket", socket, "checkout", "--store", "store-spb-1", "--exp", "12/29", "--name", "Vic Tim", "--address", "Nevsky 1",
            "--card-from-stdin",
        ], environment: env, as: Self.victim, input: Self.card)
        #expect(checkout.status == 1, "\(checkout.err)")
        #expect(checkout.err.split(separator: "\n").count == 1, "\(checkout.err)")
        #expect(checkout.err.contains("refusing to talk to \(socket): the server there runs as uid 65534"), "\(checkout.err)")
        #expect(checkout.err.contains("not as uid \(Self.victim) (this user) or root"), "\(checkout.err)")
        #expect(checkout.err.contains("--expect-server-uid 65534"), "\(checkout.err)")
        #expect(eventually { fake.connections.count == 1 })
        #expect(fake.connections == [0], "the client sent the fake server bytes")

        // The library, in this process (root): blocking and async calls alike.
        let client = GroserClient(socketPath: socket, timeout: 2)
        do {
            _ = try client.serverInfo(timeout: 2.0)
            Issue.record("the library talked to uid 65534's server")
        } catch {
            guard case .untrustedServer(_, let uid, let expected) = error else { Issue.record("\(error)"); return }
            #expect(uid == Self.attacker && expected == [0])
        }
        do {
            _ = try await client.serverInfo(timeout: .seconds(2))
            Issue.record("the library's async call talked to uid 65534's server")
        } catch {
            guard case .untrustedServer = error else { Issue.record("\(error)"); return }
        }
        #expect(eventually { fake.connections.count == 3 })
        #expect(fake.connections == [0, 0, 0], "the library sent the fake server bytes")

        // Named, by number or by name, it is talked to: the request arrives.
        let named = try runProgram(bins.groserClient, ["--socket", socket, "--expect-server-uid", "65534", "--timeout", "2", "info"],
                                   environment: env, as: Self.victim)
        #expect(named.status == 1 && named.err.contains("groserd closed the connection"), "\(named.err)")
        #expect(eventually { fake.connections.count == 4 })
        #expect((fake.connections.last ?? 0) > 0)
        let name = try #require(getpwuid(Self.attacker).map { String(cString: $0.pointee.pw_name) })
        let byName = try runProgram(bins.groserClient, ["--timeout", "2", "info"],
                                    environment: minimalEnvironment(["GROSER_SOCKET": socket, "GROSER_SERVER_UID": name]), as: Self.victim)
        #expect(byName.err.contains("groserd closed the connection"), "\(byName.err)")
        #expect(eventually { fake.connections.count == 5 })
        #expect((fake.connections.last ?? 0) > 0)
        let library = GroserClient(location: SocketLocation(path: socket, isExplicit: true, expectedServerUID: Self.attacker), timeout: 2)
        #expect(throws: GroserError.self) { _ = try library.serverInfo(timeout: 2.0) }
        #expect(eventually { fake.connections.count == 6 })
        #expect((fake.connections.last ?? 0) > 0)

        let unknown = try runProgram(bins.groserClient, ["--socket", socket, "--expect-server-uid", "no-such-user-here", "info"],
                                     environment: env, as: Self.victim)
        #expect(unknown.status == 2 && unknown.err.contains("--expect-server-uid: no user is called \"no-such-user-here\""), "\(unknown.err)")
    }

    @Test("the rename race of the issue: no racing checkout reaches another user's fake groserd")
    func theRenameRace() throws {
        try Privileged.requireOtherUsers()
        // Left by an interrupted run: the race needs the victim's daemon not started.
        try? FileManager.default.removeItem(atPath: "/tmp/groser-\(Self.victim)")
        let r = try runProgram("/usr/bin/python3", [Self.script, "--runs", "100", "--client", Daemon.groserClient,
                                                    "--victim", "\(Self.victim)", "--attacker", "\(Self.attacker)"],
                               environment: minimalEnvironment())
        #expect(r.out.contains("0 of 100 checkouts reached the fake server"), "\(r.out)\(r.err)")
        #expect(r.out.contains("0 of 100 checkouts connected to the fake server"), "\(r.out)\(r.err)")
        #expect(r.status == 0, "\(r.out)\(r.err)")
    }

    @Test("a missing default directory means groserd is not running: exit 1, one sentence")
    func aMissingDirectoryIsNoDaemon() throws {
        let scratch = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let run = scratch + "/run"
        mkdir(run, 0o700)
        let env = minimalEnvironment(["XDG_RUNTIME_DIR": run])
        let r = try runProgram(Daemon.groserClient, ["info"], environment: env)
        #expect(r.status == 1)
        #expect(r.out.isEmpty)
        #expect(r.err == "groser-client info: groserd is not running: \(run)/groser does not exist "
                + "(start groserd, or name its socket with --socket or GROSER_SOCKET)\n", "\(r.err)")
        let json = try runProgram(Daemon.groserClient, ["info", "--json"], environment: env)
        #expect(json.status == 1 && json.out.contains("\"UNAVAILABLE\""), "\(json.out)")
    }

    @Test("a relative or empty XDG_RUNTIME_DIR is ignored by groserd and groser-client")
    func aRelativeRuntimeDirectoryIsIgnored() throws {
        try Privileged.requireOtherUsers()
        let uid: UInt32 = 47_216
        try #require(getpwuid(uid) == nil, "uid \(uid) is a real account here; pick another")
        let bins = try PortableBinaries()
        // The issue's attacker made /tmp/rel 0777; here the working directory is.
        let cwd = bins.directory + "/cwd"
        mkdir(cwd, 0o777)
        chmod(cwd, 0o777)
        let data = bins.directory + "/data"
        mkdir(data, 0o700)
        chown(data, uid, uid)
        let fallback = "/tmp/groser-\(uid)"
        try? FileManager.default.removeItem(atPath: fallback)
        defer { try? FileManager.default.removeItem(atPath: fallback) }

        let daemon = try Background("/usr/bin/env", ["-C", cwd, bins.groserd, "--data", data, "--threads", "1"],
                                    environment: minimalEnvironment(["XDG_RUNTIME_DIR": "rel"]), as: uid)
        #expect(eventually { Files.isSocket(fallback + "/groserd.sock") || Files.exists(cwd + "/rel") || !daemon.process.isRunning },
                "groserd did not listen")
        #expect(!Files.exists(cwd + "/rel"), "groserd made its directory under a relative XDG_RUNTIME_DIR")
        #expect(Files.isSocket(fallback + "/groserd.sock"), "\(daemon.process.isRunning ? "" : daemon.errorOutput)")
        for runtime in ["rel", ""] {
            let info = try runProgram(bins.groserClient, ["info"], environment: minimalEnvironment(["XDG_RUNTIME_DIR": runtime]),
                                      as: uid, directory: cwd)
            #expect(info.status == 0, "XDG_RUNTIME_DIR=\(runtime): \(info.err)")
            #expect(info.out.contains("socket:           \(fallback)/groserd.sock"), "\(info.out)")
        }
        #expect(daemon.terminate() == 0, "\(daemon.errorOutput)")
    }

    @Test("checkout reads the holder's name and the address from standard input, so ps never shows them")
    func checkoutReadsTheDetailsFromStandardInput() throws {
        let daemon = try Daemon()
        let config = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: config) }
        let env = minimalEnvironment(["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": config])
        func run(_ arguments: [String], input: String? = nil) throws -> ProgramResult {
            try runProgram(Daemon.groserClient, arguments, environment: env, input: input)
        }
        let store = try run(["get-store", "--city", "SPB", "--products", "--json"])
        let product = try #require(store.out.range(of: #"prd-spb-1-\d+"#, options: .regularExpression).map { String(store.out[$0]) })
        #expect(try run(["cart", "add", product, "--city", "SPB"]).status == 0)
        let checkout = ["checkout", "--city", "SPB", "--exp", "12/29", "--card-from-stdin", "--json"]

        let short = try run(checkout, input: Self.card + "Vic Tim\n")
        #expect(short.status == 2 && short.err.contains("the delivery address was not given"), "\(short.err)")
        let paid = try run(checkout, input: Self.card + "Vic Tim\nNevsky pr. 1, apt 5\n")
        #expect(paid.status == 0, "\(paid.err)")
        #expect(paid.out.contains("\"holderName\": \"Vic Tim\""), "\(paid.out)")
        #expect(paid.out.contains("\"deliveryAddress\": \"Nevsky pr. 1, apt 5\""), "\(paid.out)")

        // A flag given is not read: only the missing one comes from stdin.
        #expect(try run(["cart", "add", product, "--city", "SPB"]).status == 0)
        let mixed = try run(checkout + ["--name", "IVAN PETROV"], input: Self.card + "Nevsky 2\n")
        #expect(mixed.status == 0, "\(mixed.err)")
        #expect(mixed.out.contains("\"holderName\": \"IVAN PETROV\"") && mixed.out.contains("\"deliveryAddress\": \"Nevsky 2\""),
                "\(mixed.out)")
    }
}
