import Foundation
import GroserClient
import Testing

/// The client's remembered city and session, in a file of its own.
@Suite("client settings file")
struct ClientSettingsTests {
    /// A fresh temporary directory, removed with everything in it when released.
    final class Scratch {
        let path: String
        init() throws {
            var template = Array("/tmp/groser-settings-XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            guard let made else { throw TestFailure("mkdtemp failed, errno \(errno)") }
            path = String(cString: made)
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

    @Test("what is saved is what is loaded", arguments: [
        ClientSettings(cityCode: "SPB", session: token),
        ClientSettings(cityCode: "MSK", session: nil),
        ClientSettings(cityCode: nil, session: token),
        ClientSettings(cityCode: nil, session: nil),
    ])
    func roundTrip(settings: ClientSettings) throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try settings.save(to: path)
        #expect(try ClientSettings.load(from: path) == settings)
    }

    @Test("a later save replaces the earlier one entirely: a forgotten session stays forgotten")
    func saveReplaces() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", session: Self.token).save(to: path)
        try ClientSettings(cityCode: "KZN", session: nil).save(to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "KZN", session: nil))
        #expect(!(try Self.contents(path)).contains(Self.token), "the old token is gone from the file")
    }

    @Test("the file is readable by its owner only, even when it was not before")
    func ownerOnly() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", session: Self.token).save(to: path)
        #expect(try Self.permissions(path) == 0o600)

        let old = dir.file("old.conf")
        try Self.write("city=MSK\n", to: old, mode: 0o644)
        #expect(try Self.permissions(old) == 0o644)
        try ClientSettings(cityCode: "SPB", session: Self.token).save(to: old)
        #expect(try Self.permissions(old) == 0o600, "the session token is a secret")
    }

    @Test("a save replaces the file atomically and leaves no temporary file behind")
    func atomicReplace() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try ClientSettings(cityCode: "SPB", session: Self.token).save(to: path)
        let before = try Self.contents(path)
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)

        // A reader that opened the old file keeps reading the whole old file:
        // the new one is renamed over it, not written into it.
        let reader = try #require(FileHandle(forReadingAtPath: path))
        defer { try? reader.close() }
        try ClientSettings(cityCode: "EKB", session: nil).save(to: path)
        let seenByReader = String(decoding: try reader.readToEnd() ?? Data(), as: UTF8.self)
        #expect(seenByReader == before)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "EKB"))
        let newInode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)
        #expect(newInode != inode, "a new file took the name")

        for i in 0..<20 { try ClientSettings(cityCode: "C\(i)", session: Self.token).save(to: path) }
        #expect(try Self.listing(dir.path) == ["client.conf"], "no .tmp file is left beside it")
    }

    @Test("a reader never sees half a file while saves go on")
    func readersSeeWholeFiles() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        let a = ClientSettings(cityCode: "SPB", session: Self.token)
        let b = ClientSettings(cityCode: "NNV", session: String(repeating: "f", count: 32))
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

    @Test("no file yet means empty settings, and loading creates nothing")
    func missingFile() throws {
        let dir = try Scratch()
        #expect(try ClientSettings.load(from: dir.file("client.conf")) == ClientSettings())
        #expect(try ClientSettings.load(from: dir.file("no/such/dir/client.conf")) == ClientSettings())
        #expect(try Self.listing(dir.path).isEmpty)
    }

    @Test("comments, blank lines, unknown keys and stray spaces are ignored", arguments: [
        ("# groser-client settings\ncity=SPB\nsession=abc\n", "SPB", "abc"),
        ("color=blue\ncity=SPB\ntheme=dark\n", "SPB", nil),
        ("# session=evil\ncity=MSK\n", "MSK", nil),
        ("#city=KZN\n  # comment\n\n\nsession=abc", nil, "abc"),
        ("not a setting\ncity\n=SPB\ncity=KZN\n", "KZN", nil),
        ("  city =  SPB \t\n\tsession\t=\tabc  \n", "SPB", "abc"),
        ("city=SPB\r\nsession=abc\r\n", "SPB", "abc"),
        ("city=\nsession=\n", nil, nil),
        ("City=SPB\nSESSION=abc\ncities=MSK\nsessions=x\n", nil, nil),
        ("", nil, nil),
    ] as [(String, String?, String?)])
    func tolerantParsing(text: String, city: String?, session: String?) throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try Self.write(text, to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: city, session: session))
    }

    @Test("a hand-edited file keeps working after the client saves over it")
    func handEditedThenSaved() throws {
        let dir = try Scratch()
        let path = dir.file("client.conf")
        try Self.write("# mine\ncolor=blue\ncity=MSK\n", to: path)
        var settings = try ClientSettings.load(from: path)
        settings.session = Self.token
        try settings.save(to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "MSK", session: Self.token))
    }

    @Test("missing directories are created, private to the user")
    func createsDirectories() throws {
        let dir = try Scratch()
        let path = dir.path + "/config/groser/client.conf"
        try ClientSettings(cityCode: "NSK", session: Self.token).save(to: path)
        #expect(try ClientSettings.load(from: path) == ClientSettings(cityCode: "NSK", session: Self.token))
        for created in [dir.path + "/config", dir.path + "/config/groser"] {
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: created, isDirectory: &isDirectory) && isDirectory.boolValue)
            #expect(try Self.permissions(created) & 0o077 == 0, "\(created) is open to others")
        }
        // An existing directory is used as it is.
        try ClientSettings(cityCode: "KRR").save(to: path)
        #expect(try ClientSettings.load(from: path).cityCode == "KRR")
    }

    @Test("the default path follows XDG: $XDG_CONFIG_HOME/groser/client.conf, else ~/.config")
    func defaultPath() {
        let path = ClientSettings.defaultPath()
        #expect(path.hasSuffix("/groser/client.conf"))
        if let xdg = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
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
