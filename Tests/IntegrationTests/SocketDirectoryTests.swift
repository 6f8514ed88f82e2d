import Foundation
import GroserClient
import GroserSystem
import Testing

/// Another user who makes the per-user socket directory (or can write to
/// it) can rename groserd's socket away and bind their own: the client then
/// sends them its requests, a card number at checkout. groserd refuses such
/// a directory and groser-client will not connect through it.
@Suite("the socket directory", .serialized)
struct SocketDirectoryTests {
    /// Ways the default directory can be unsafe, made by the user itself
    /// (other owners need root: see `theAttackFailsWithTwoRealUsers`).
    enum Unsafe: String, CaseIterable, CustomTestStringConvertible {
        case symbolicLink, writableByGroupAndOthers, writableByGroup, writableByOthers
        var testDescription: String { rawValue }

        /// Makes `directory` so; returns where a socket "inside" it really is.
        func make(_ directory: String, beside scratch: String) -> String {
            switch self {
            case .symbolicLink:
                let elsewhere = scratch + "/elsewhere"
                mkdir(elsewhere, 0o700)
                symlink(elsewhere, directory)
                return elsewhere
            case .writableByGroupAndOthers, .writableByGroup, .writableByOthers:
                mkdir(directory, 0o700)
                chmod(directory, mode)
                return directory
            }
        }

        var mode: mode_t {
            switch self {
            case .symbolicLink: 0
            case .writableByGroupAndOthers: 0o777
            case .writableByGroup: 0o770
            case .writableByOthers: 0o703
            }
        }

        /// How groserd and groser-client name the problem.
        var reason: String {
            switch self {
            case .symbolicLink: "is a symbolic link"
            case .writableByGroupAndOthers: "is writable by its group and others (mode 0777)"
            case .writableByGroup: "is writable by its group (mode 0770)"
            case .writableByOthers: "is writable by others (mode 0703)"
            }
        }
    }

    /// A scratch directory standing in for $XDG_RUNTIME_DIR, so these run
    /// without root: the default socket is then `<run>/groser/groserd.sock`.
    final class Runtime {
        let scratch = Daemon.makeTemporaryDirectory()
        var run: String { scratch + "/run" }
        var directory: String { run + "/groser" }
        var socket: String { directory + "/groserd.sock" }
        var data: String { scratch + "/data" }
        var environment: [String: String] { minimalEnvironment(["XDG_RUNTIME_DIR": run]) }
        init() { mkdir(scratch + "/run", 0o700) }
        deinit { try? FileManager.default.removeItem(atPath: scratch) }
    }

    @Test("groserd creates a missing default directory 0700 and groser-client connects through it")
    func aMissingDirectoryIsCreatedPrivately() throws {
        let rt = Runtime()
        let daemon = try Background(Daemon.groserd, ["--data", rt.data, "--threads", "1"], environment: rt.environment)
        #expect(eventually { Files.isSocket(rt.socket) || !daemon.process.isRunning }, "groserd did not listen")
        let st = try #require(fileStatus(rt.directory))
        #expect(st.st_mode & S_IFMT == S_IFDIR)
        #expect(st.st_uid == getuid())
        #expect(st.st_mode & 0o7777 == 0o700)
        let info = try runProgram(Daemon.groserClient, ["info"], environment: rt.environment)
        #expect(info.status == 0, "\(info.err)")
        #expect(info.out.contains("socket:           \(rt.socket)"))
        #expect(daemon.terminate() == 0, "\(daemon.errorOutput)")
    }

    @Test("with --socket-group the directory groserd creates is 0710 with that group")
    func aSocketGroupDirectoryIs0710() throws {
        let rt = Runtime()
        let daemon = try Background(Daemon.groserd, ["--data", rt.data, "--threads", "1", "--socket-group", "\(getgid())"],
                                    environment: rt.environment)
        #expect(eventually { Files.isSocket(rt.socket) || !daemon.process.isRunning }, "groserd did not listen")
        let st = try #require(fileStatus(rt.directory))
        #expect(st.st_mode & 0o7777 == 0o710 && st.st_gid == getgid())
        #expect(daemon.terminate() == 0, "\(daemon.errorOutput)")
    }

    @Test("groserd refuses an unsafe default directory with one line and exit 1", arguments: Unsafe.allCases)
    func theDaemonRefuses(_ unsafe: Unsafe) throws {
        let rt = Runtime()
        let real = unsafe.make(rt.directory, beside: rt.scratch)
        let daemon = try Background(Daemon.groserd, ["--data", rt.data, "--threads", "1"], environment: rt.environment)
        let status = daemon.waitForExit(seconds: 15)
        #expect(status == 1, "groserd started in \(unsafe.rawValue) directory")
        let lines = daemon.errorOutput.split(separator: "\n")
        #expect(lines.count == 1, "\(lines)")
        let line = String(lines.first ?? "")
        #expect(line.contains("refusing the socket directory: \(rt.directory) \(unsafe.reason)"), "\(line)")
        #expect(line.contains("another user could"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: real).isEmpty, "nothing was bound there")
        #expect(!Files.exists(rt.data), "nothing else was started")
    }

    @Test("groserd and groser-client refuse a default directory whose parent others may write to (no sticky bit)")
    func anUnsafeParentIsRefused() throws {
        let rt = Runtime()
        chmod(rt.run, 0o777)
        let daemon = try Background(Daemon.groserd, ["--data", rt.data, "--threads", "1"], environment: rt.environment)
        #expect(daemon.waitForExit(seconds: 15) == 1, "groserd started under a parent anyone may write to")
        let log = daemon.errorOutput
        #expect(log.split(separator: "\n").count == 1, "\(log)")
        #expect(log.contains("refusing the socket directory: \(rt.run) is writable by its group and others (mode 0777)"), "\(log)")
        #expect(!Files.exists(rt.socket), "nothing was bound")
        mkdir(rt.directory, 0o700)
        let r = try runProgram(Daemon.groserClient, ["info"], environment: rt.environment)
        #expect(r.status == 1)
        #expect(r.err.contains("refusing to connect to \(rt.socket): \(rt.run) is writable by its group and others"), "\(r.err)")
    }

    @Test("groser-client refuses to connect through an unsafe default directory, and says why", arguments: Unsafe.allCases)
    func theClientRefuses(_ unsafe: Unsafe) throws {
        let rt = Runtime()
        let real = unsafe.make(rt.directory, beside: rt.scratch)
        let impostor = try Impostor(path: real + "/groserd.sock")
        let r = try runProgram(Daemon.groserClient, ["info"], environment: rt.environment)
        #expect(r.status == 1)
        #expect(r.out.isEmpty)
        #expect(r.err.split(separator: "\n").count == 1, "\(r.err)")
        #expect(r.err.contains("refusing to connect to \(rt.socket): \(rt.directory) \(unsafe.reason)"), "\(r.err)")
        #expect(!impostor.wasConnectedTo, "the client connected to the impostor")

        // A socket named explicitly is the user's choice and is used as given.
        let named = try runProgram(Daemon.groserClient, ["--socket", rt.socket, "--timeout", "0.5", "info"], environment: rt.environment)
        #expect(named.status == 68 && named.err.contains("no answer"), "a client-side deadline exits 68, as grpcurl: \(named.err)")
        #expect(impostor.wasConnectedTo)
    }

    @Test("a named socket's directory that others may write to needs the sticky bit", arguments: [
        (0o777 as mode_t, false), (0o770, false), (0o1777, true), (0o1770, true), (0o755, true), (0o700, true),
    ])
    func aNamedDirectory(mode: mode_t, accepted: Bool) throws {
        let rt = Runtime()
        let shared = rt.scratch + "/shared"
        mkdir(shared, 0o700)
        chmod(shared, mode)
        let daemon = try Background(Daemon.groserd, ["--socket", shared + "/g.sock", "--data", rt.data, "--threads", "1"],
                                    environment: rt.environment)
        if accepted {
            #expect(eventually { Files.isSocket(shared + "/g.sock") || !daemon.process.isRunning })
            #expect(daemon.terminate() == 0, "\(daemon.errorOutput)")
        } else {
            #expect(daemon.waitForExit(seconds: 15) == 1)
            let err = daemon.errorOutput
            #expect(err.split(separator: "\n").count == 1, "\(err)")
            #expect(err.contains("refusing the socket directory: \(shared) is writable by its group"), "\(err)")
            #expect(err.contains("sticky bit"))
        }
    }

    // MARK: Two real users

    /// User 1001 of the issue: a uid with no password entry, unlikely to be in use.
    static let victim: UInt32 = 47_213
    /// The attacker of the issue: nobody.
    static let attacker: UInt32 = 65_534

    enum Attack: String, CaseIterable, CustomTestStringConvertible {
        /// `mkdir -m 0777 /tmp/groser-UID`, as in the issue.
        case worldWritableDirectory
        /// `ln -s <a directory of the attacker's> /tmp/groser-UID`.
        case symbolicLink
        var testDescription: String { rawValue }
    }

    // Both attacks in one test, not one test case per attack, so that where
    // it cannot run the runner shows the test itself as cancelled, with why.
    @Test("the issue's attack fails with two real users: groserd refuses, groser-client refuses; a correct directory works")
    func theAttackFailsWithTwoRealUsers() throws {
        try Privileged.requireOtherUsers()
        for attack in Attack.allCases {
            try attackFailsWithTwoRealUsers(attack)
        }
    }

    /// One attack of the issue, as `attacker` against `victim`.
    func attackFailsWithTwoRealUsers(_ attack: Attack) throws {
        try #require(getpwuid(Self.victim) == nil, "uid \(Self.victim) is a real account here; pick another")
        let bins = try PortableBinaries()
        let data = bins.directory + "/data"
        mkdir(data, 0o700)
        chown(data, Self.victim, Self.victim)
        let directory = "/tmp/groser-\(Self.victim)"
        let socket = directory + "/groserd.sock"
        // A directory of nobody's own, for the link to point to.
        let attackerOwn = Daemon.makeTemporaryDirectory()
        chown(attackerOwn, Self.attacker, Self.attacker)
        chmod(attackerOwn, 0o777)
        // Left over from an interrupted run, or made by this one.
        func clean() { try? FileManager.default.removeItem(atPath: directory) }
        clean()
        defer {
            clean()
            try? FileManager.default.removeItem(atPath: attackerOwn)
        }
        let env = minimalEnvironment()  // no XDG_RUNTIME_DIR, no GROSER_SOCKET: a cron job

        // nobody prepares the victim's default directory.
        let prepared = switch attack {
        case .worldWritableDirectory: try runProgram("/bin/mkdir", ["-m", "0777", directory], environment: env, as: Self.attacker)
        case .symbolicLink: try runProgram("/bin/ln", ["-s", attackerOwn, directory], environment: env, as: Self.attacker)
        }
        #expect(prepared.status == 0, "\(prepared.err)")
        #expect(fileStatus(directory)?.st_uid == Self.attacker)
        let reason = attack == .symbolicLink ? "\(directory) is a symbolic link" : "\(directory) belongs to uid \(Self.attacker), not to uid \(Self.victim)"

        // The victim's groserd refuses it: one line, exit 1, nothing bound.
        let refused = try Background(bins.groserd, ["--data", data, "--threads", "1"], environment: env, as: Self.victim)
        #expect(refused.waitForExit(seconds: 15) == 1)
        let log = refused.errorOutput
        #expect(log.split(separator: "\n").count == 1, "\(log)")
        #expect(log.contains("cannot start: refusing the socket directory: \(reason)"), "\(log)")
        #expect(!Files.exists(socket), "groserd bound a socket in the attacker's directory")

        // nobody's socket in its place: the victim's client will not use it.
        let real = attack == .symbolicLink ? attackerOwn : directory
        let impostor = try Impostor(path: real + "/groserd.sock")
        lchown(real + "/groserd.sock", Self.attacker, Self.attacker)
        let info = try runProgram(bins.groserClient, ["info"], environment: env, as: Self.victim)
        #expect(info.status == 1)
        #expect(info.err.contains("refusing to connect to \(socket): \(attack == .symbolicLink ? reason : reason + " or root")"), "\(info.err)")
        let checkout = try runProgram(bins.groserClient, [
            "checkout", "--store", "store-spb-1", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin",
        ], environment: env, as: Self.victim, input: "4111 1111 1111 1111\n123\n")
        #expect(checkout.status == 1)
        #expect(checkout.err.contains("refusing to connect to \(socket)"), "\(checkout.err)")
        #expect(!impostor.wasConnectedTo, "the victim's client connected to nobody's socket")

        // Control: without the attacker's directory the same programs work,
        // and the directory groserd makes keeps nobody out.
        clean()
        let daemon = try Background(bins.groserd, ["--data", data, "--threads", "1"], environment: env, as: Self.victim)
        #expect(eventually { Files.isSocket(socket) || !daemon.process.isRunning }, "groserd did not listen")
        let st = try #require(fileStatus(directory))
        #expect(st.st_mode & S_IFMT == S_IFDIR && st.st_uid == Self.victim && st.st_mode & 0o7777 == 0o700)
        let ok = try runProgram(bins.groserClient, ["info"], environment: env, as: Self.victim)
        #expect(ok.status == 0, "\(ok.err)")
        #expect(ok.out.contains(socket))
        let outsider = try runProgram(bins.groserClient, ["--socket", socket, "cities"], environment: env, as: Self.attacker)
        #expect(outsider.status == 1 && outsider.err.contains("Permission denied"), "\(outsider.err)")
        #expect(daemon.terminate() == 0, "\(daemon.errorOutput)")
    }

    // MARK: The check itself

    @Test("SocketDirectory.check: what the private policy accepts", arguments: [
        (0o700 as mode_t, true), (0o710, true), (0o750, true), (0o755, true), (0o711, true),
        (0o720, false), (0o702, false), (0o777, false), (0o1777, false),
    ])
    func privatePolicy(mode: mode_t, trusted: Bool) throws {
        let scratch = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        chmod(scratch, mode)
        let check = SocketDirectory.check(scratch, .privateTo(owners: [getuid()]))
        #expect((check == .trusted) == trusted, "\(check)")
        #expect(SocketDirectory.check(scratch, .privateTo(owners: [getuid() &+ 1])) != .trusted, "another owner is refused")
        #expect(SocketDirectory.check(scratch + "/missing", .privateTo(owners: [getuid()])) == .missing)
        let file = scratch + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: nil))
        guard case .refused(let problem) = SocketDirectory.check(file, .privateTo(owners: [getuid()])) else {
            Issue.record("a file was accepted as a directory")
            return
        }
        #expect(problem.reason == .notADirectory)
    }

    @Test("SocketDirectory.checkParents: a parent others may write to needs the sticky bit; the default's belong to the user or root")
    func parents() throws {
        let scratch = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let parent = scratch + "/parent"
        mkdir(parent, 0o700)
        let directory = parent + "/groser"
        let owners = [getuid(), 0]
        #expect(SocketDirectory.checkParents(of: directory, owners: owners) == nil)
        chmod(parent, 0o777)
        #expect(SocketDirectory.checkParents(of: directory, owners: owners)
                == SocketDirectoryProblem(directory: parent, reason: .writableByOthers(mode: 0o777)))
        #expect(SocketDirectory.checkParents(of: directory, owners: nil) != nil, "a named socket's parents too")
        chmod(parent, 0o1777)
        #expect(SocketDirectory.checkParents(of: directory, owners: owners) == nil, "sticky, as /tmp")
        chmod(parent, 0o755)
        #expect(SocketDirectory.checkParents(of: directory, owners: [getuid() &+ 1]) != nil, "another owner")
        #expect(SocketDirectory.checkParents(of: "relative/groser", owners: owners) == nil, "nothing above a relative path is checked")
        if getuid() == 0 {
            chown(parent, 65_534, 65_534)
            #expect(SocketDirectory.checkParents(of: directory, owners: owners)
                    == SocketDirectoryProblem(directory: parent, reason: .ownedByAnotherUser(owner: 65_534, expected: owners)))
            #expect(SocketDirectory.checkParents(of: directory, owners: nil) == nil, "a named socket's parent may be anyone's")
        }
    }

    @Test("SocketDirectory.open: what it opens, and what it refuses through the descriptor")
    func opening() throws {
        let scratch = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let directory = scratch + "/groser"
        let owners = [getuid()]
        #expect(SocketDirectory.open(directory, owners: owners) == .missing)
        mkdir(directory, 0o700)
        guard case .opened(let fd) = SocketDirectory.open(directory, owners: owners) else {
            Issue.record("a private directory was not opened")
            return
        }
        // The descriptor names the directory even after a rename: what a
        // client connects through.
        #expect(rename(directory, scratch + "/moved") == 0)
        #expect(FileManager.default.createFile(atPath: scratch + "/moved/probe", contents: nil))
        var st = stat()
        #expect(stat("/proc/self/fd/\(fd)/probe", &st) == 0)
        close(fd)
        #expect(rename(scratch + "/moved", directory) == 0)
        chmod(directory, 0o770)
        #expect(SocketDirectory.open(directory, owners: owners)
                == .refused(SocketDirectoryProblem(directory: directory, reason: .writableByOthers(mode: 0o770))))
        chmod(directory, 0o700)
        if getuid() == 0 {
            chown(directory, 65_534, 65_534)
            #expect(SocketDirectory.open(directory, owners: owners)
                    == .refused(SocketDirectoryProblem(directory: directory, reason: .ownedByAnotherUser(owner: 65_534, expected: owners))))
            chown(directory, 0, 0)
        }
        symlink(directory, scratch + "/link")
        #expect(SocketDirectory.open(scratch + "/link", owners: owners)
                == .refused(SocketDirectoryProblem(directory: scratch + "/link", reason: .symbolicLink)))
        #expect(FileManager.default.createFile(atPath: scratch + "/file", contents: nil))
        #expect(SocketDirectory.open(scratch + "/file", owners: owners)
                == .refused(SocketDirectoryProblem(directory: scratch + "/file", reason: .notADirectory)))
    }
}
