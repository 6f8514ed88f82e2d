import Foundation
import GroserClient
import GroserSystem
import Testing

/// The client's remembered city and session, in a file of its own.
@Suite("client settings file")
struct ClientSettingsTests {
    /// A fresh temporary directory, removed with everything in it when released.
    final class Scratch {
        let path: String
        init() throws {
            // The one mkdtemp wrapper (GroserSystem): it reads the name while
            // the template is alive.
            do { path = try Files.makeTemporaryDirectory(prefix: "groser-settings-") } catch { throw TestFailure("mkdtemp failed: \(error)") }
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        func file(_ name: String) -> String { path + "/" + name }
    }

    static func write(_ text: String, to path: String, mode: Int = 0o644) throws {
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]))
    }

    static func permissions(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int)
    }

    static func contents(_ path: String) throws -> String {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
    }

    static func listing(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
    }

    static let token = "0123456789abcdef0123456789abcdef"
    static let other = "fedcba9876543210fedcba9876543210"
    static let socket = "/run/user/1001/groser/groserd.sock"

    @Test("what is saved is what is loaded", arguments: [
        ClientSettings(cityCode: "SPB", sessions: [socket: token]),
        ClientSettings(cityCode: "MSK"),
        ClientSettings(sessions: [socket: token, "/tmp/test/g.sock": other]),
        ClientSettings(cityCode: "KZN", sessions: ["/tmp/a=b c%d/g\tx.sock": token, "/tmp/ёлка/g.sock": other]),
        ClientSettings(cityCode: "EKB", sessions: ["relative.sock": token], legacySession: other),
        ClientSettings(),
    ])
    func roundTrip(settings: ClientSettings) throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try settings.save(to: path)
        #expect(try ClientSettings.load(from: path) == settings)
    }

    @Test("sessions are kept per socket path, each on a readable line")
    func perSocketLines() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token, "/tmp/a=b/g.sock": Self.other]).save(to: path)
        let text = try Self.contents(path)
        #expect(text.contains("city=SPB\n"))
        #expect(text.contains("session.\(Self.socket)=\(Self.token)\n"))
        #expect(text.contains("session./tmp/a%3Db/g.sock=\(Self.other)\n"), "an = in the path is escaped: \(text)")
        let loaded = try ClientSettings.load(from: path)
        #expect(loaded.session(for: Self.socket) == Self.token)
        #expect(loaded.session(for: "/tmp/a=b/g.sock") == Self.other)
        #expect(loaded.session(for: "/tmp/other.sock") == nil)
    }

    @Test("a plain session= line of earlier versions is kept and stands in for the default socket only")
    func legacySessionLine() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try Self.write("city=SPB\nsession=\(Self.token)\n", to: path)
        var settings = try ClientSettings.load(from: path)
        #expect(settings.legacySession == Self.token && settings.sessions.isEmpty)
        #expect(settings.session(for: Self.socket, isDefaultSocket: true) == Self.token)
        #expect(settings.session(for: Self.socket) == nil)
        settings.sessions["/tmp/b.sock"] = Self.other
        try settings.save(to: path)
        #expect(try Self.contents(path) == "city=SPB\nsession=\(Self.token)\nsession./tmp/b.sock=\(Self.other)\n")
        // A token of the default socket's own comes first.
        settings.sessions[Self.socket] = Self.other
        #expect(settings.session(for: Self.socket, isDefaultSocket: true) == Self.other)
    }

    @Test("a later save replaces the known keys entirely: a forgotten session stays forgotten")
    func saveReplaces() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token]).save(to: path)
        try ClientSettings(cityCode: "KZN").save(to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "KZN"))
        #expect(!(try Self.contents(path)).contains(Self.token), "the old token is gone from the file")
    }

    @Test("the file is readable by its owner only, even when it was not before")
    func ownerOnly() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token]).save(to: path)
        #expect(try Self.permissions(path) == 0o600)

        let old = dir.file("old.conf")
        try Self.write("city=MSK\n", to: old, mode: 0o644)
        #expect(try Self.permissions(old) == 0o644)
        try ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token]).save(to: old)
        #expect(try Self.permissions(old) == 0o600, "the session token is a secret")
    }

    @Test("a save replaces the file atomically and leaves no temporary file behind")
    func atomicReplace() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token]).save(to: path)
        let before = try Self.contents(path)
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)

        // A reader that opened the old file keeps reading the whole old file:
        // the new one is renamed over it, not written into it.
        let reader = try #require(FileHandle(forReadingAtPath: path))
        defer { try? reader.close() }
        try ClientSettings(cityCode: "EKB").save(to: path)
        let seenByReader = String(decoding: try reader.readToEnd() ?? Data(), as: UTF8.self)
        #expect(seenByReader == before)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "EKB"))
        let newInode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)
        #expect(newInode != inode, "a new file took the name")

        for i in 0..<20 { try ClientSettings(cityCode: "C\(i)", sessions: [Self.socket: Self.token]).save(to: path) }
        #expect(try Self.listing(dir.path) == ["client.conf"], "no .tmp file is left beside it")
    }

    @Test("a reader never sees half a file while saves go on")
    func readersSeeWholeFiles() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        let a = ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token])
        let b = ClientSettings(cityCode: "NNV", sessions: [Self.socket: String(repeating: "f", count: 32), "/tmp/x.sock": Self.other])
        try a.save(to: path)
        let done = ManagedFlag()
        let bad = ManagedFlag()
        let reader = Thread {
            while !done.isSet {
                guard let s = try? ClientSettings.load(from: path), s == a || s == b else { bad.set(); return }
            }
        }
        reader.start()
        for i in 0..<300 { try (i % 2 == 0 ? b : a).save(to: path) }
        done.set()
        while !reader.isFinished { usleep(1000) }
        #expect(!bad.isSet, "a load saw a missing or partial file")
        #expect(try Self.listing(dir.path) == ["client.conf"])
    }

    @Test("updates from many threads at once keep every one of their sessions")
    func concurrentUpdatesLoseNothing() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        let failures = Mutex2()
        DispatchQueue.concurrentPerform(iterations: 16) { i in
            do {
                try ClientSettings.update(at: path) { $0.sessions["/tmp/d\(i).sock"] = String(repeating: "\(i % 10)", count: 32) }
            } catch {
                failures.add("\(error)")
            }
        }
        #expect(failures.values.isEmpty)
        let loaded = try ClientSettings.load(from: path)
        #expect(loaded.sessions.count == 16, "\(loaded.sessions.keys.sorted())")
    }

    @Test("no file yet means empty settings, and loading creates nothing")
    func missingFile() throws {
        let dir = try Scratch()
        #expect(try ClientSettings.load(from: dir.file("client.conf")) == ClientSettings())
        #expect(try ClientSettings.load(from: dir.file("no/such/dir/client.conf")) == ClientSettings())
        #expect(try Self.listing(dir.path).isEmpty)
    }

    @Test("comments, blank lines, unknown keys and stray spaces are accepted", arguments: [
        ("# groser-client settings\ncity=SPB\nsession=abc\n", "SPB", "abc"),
        ("color=blue\ncity=SPB\ntheme=dark\n", "SPB", nil),
        ("# session=evil\ncity=MSK\n", "MSK", nil),
        ("#city=KZN\n  # comment\n\n\nsession=abc", nil, "abc"),
        ("  city =  SPB \t\n\tsession\t=\tabc  \n", "SPB", "abc"),
        ("city=SPB\r\nsession=abc\r\n", "SPB", "abc"),
        ("city=\nsession=\n", nil, nil),
        ("City=SPB\nSESSION=abc\ncities=MSK\nsessions=x\n", nil, nil),
        ("", nil, nil),
    ] as [(String, String?, String?)])
    func acceptedFiles(text: String, city: String?, legacy: String?) throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try Self.write(text, to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: city, legacySession: legacy))
    }

    @Test("a malformed file is an error naming the file and the line, and is never saved over", arguments: [
        (Array("garbage".utf8), 1, "\"garbage\" is not a key=value setting"),
        (Array("city=SPB\nnot a setting\n".utf8), 2, "\"not a setting\" is not a key=value setting"),
        (Array("# ok\n\n=SPB\n".utf8), 3, "there is no key before the ="),
        (Array("city=SPB\ncity=KZN\n".utf8), 2, "city is set again (first on line 1)"),
        (Array("session./tmp/a.sock=x\nsession./tmp/a.sock=y\n".utf8), 2, "session./tmp/a.sock is set again"),
        (Array("session.=abc\n".utf8), 1, "does not name a socket path"),
        (Array("session./tmp/%zz.sock=abc\n".utf8), 1, "does not name a socket path"),
        (Array("city=S\u{1B}[31mPB\n".utf8), 1, "control character"),
        (Array("city=SPB\n".utf8) + [0xFF, 0xFE, 0x0A], 2, "not UTF-8 text"),
    ] as [([UInt8], Int, String)])
    func malformedFiles(bytes: [UInt8], line: Int, reason: String) throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        func expectMalformed(_ body: () throws(SettingsError) -> Void) {
            do {
                try body()
                Issue.record("accepted \(text.debugDescription)")
            } catch {
                guard case .malformed(let n, let why) = error.problem else { Issue.record("\(error)"); return }
                #expect(n == line)
                #expect(why.contains(reason), "\(why)")
                #expect(error.path == path)
                #expect(error.description.contains("\(path), line \(line)"), "\(error)")
            }
        }
        expectMalformed { () throws(SettingsError) in _ = try ClientSettings.load(from: path) }
        expectMalformed { () throws(SettingsError) in try ClientSettings(cityCode: "MSK").save(to: path) }
        expectMalformed { () throws(SettingsError) in try ClientSettings.update(at: path) { $0.cityCode = "MSK" } }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(bytes), "the file was left as it is")
    }

    @Test("a value that would not read back the same is refused, and the file kept")
    func unsafeValues() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB").save(to: path)
        let before = try Self.contents(path)
        for bad in [ClientSettings(cityCode: "SPB\ncity=EVIL"), ClientSettings(sessions: [Self.socket: "abc\nsession=x"]),
                    ClientSettings(sessions: [Self.socket: " abc"])] {
            #expect(throws: SettingsError.self) { try bad.save(to: path) }
        }
        #expect(try Self.contents(path) == before)
    }

    @Test("a hand-edited file keeps its comments and other keys after the client saves over it")
    func handEditedThenSaved() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try Self.write("# mine\ncolor=blue\ncity=MSK\n\n# sessions below\n", to: path)
        var settings = try ClientSettings.load(from: path)
        settings.sessions[Self.socket] = Self.token
        settings.cityCode = "SPB"
        try settings.save(to: path)
        #expect(try Self.contents(path) == "# mine\ncolor=blue\ncity=SPB\n\n# sessions below\nsession.\(Self.socket)=\(Self.token)\n")
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "SPB", sessions: [Self.socket: Self.token]))
    }

    @Test("missing directories are created, private to the user")
    func createsDirectories() throws {
        let dir = try Scratch()
        let path = dir.path + "/config/groser/client.conf"
        try ClientSettings(cityCode: "NSK", sessions: [Self.socket: Self.token]).save(to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "NSK", sessions: [Self.socket: Self.token]))
        for created in [dir.path + "/config", dir.path + "/config/groser"] {
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: created, isDirectory: &isDirectory) && isDirectory.boolValue)
            #expect(try Self.permissions(created) & 0o077 == 0, "\(created) is open to others")
        }
        // An existing directory is used as it is.
        try ClientSettings(cityCode: "KRR").save(to: path)
        #expect(try ClientSettings.load(from: path).cityCode == "KRR")
    }

    @Test("the default path follows XDG: $XDG_CONFIG_HOME/groser/client.conf when absolute, else ~/.config")
    func defaultPath() {
        let path = ClientSettings.defaultPath()
        #expect(path.hasSuffix("/groser/client.conf"))
        if let xdg = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            #expect(path == xdg + "/groser/client.conf")
        } else if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
            #expect(path == home + "/.config/groser/client.conf")
        }
    }
}

/// A flag set once from any thread.
private final class ManagedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
