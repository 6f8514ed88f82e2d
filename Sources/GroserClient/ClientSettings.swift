import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// What the client remembers between runs, like the app remembers the
/// chosen city: a small `key=value` file under `$XDG_CONFIG_HOME/groser/`
/// (else `~/.config/groser/`), replaced atomically on every save.
///
/// ```
/// # groser-client settings
/// city=SPB
/// session./run/user/1001/groser/groserd.sock=0123456789abcdef0123456789abcdef
/// session./tmp/test/g.sock=fedcba9876543210fedcba9876543210
/// ```
///
/// A session belongs to the daemon that opened it, so tokens are kept per
/// socket path (in the key, with `%`, `=`, spaces and control characters
/// written as `%XX`). A plain `session=` line, as earlier versions wrote,
/// is kept as it is and used for the default socket when that has no token
/// of its own. Comments and keys this version does not know are kept too.
/// A file that cannot be read or parsed is an error and is never replaced.
public struct ClientSettings: Sendable, Hashable {
    /// The selected city's code, e.g. "SPB".
    public var cityCode: String?
    /// Customer session tokens from OpenSession, by the socket path of the
    /// daemon that opened them, so carts continue across runs.
    public var sessions: [String: String]
    /// A token from a plain `session=` line (earlier versions), which does
    /// not say which daemon opened it.
    public var legacySession: String?

    public init(cityCode: String? = nil, sessions: [String: String] = [:], legacySession: String? = nil) {
        self.cityCode = cityCode
        self.sessions = sessions
        self.legacySession = legacySession
    }

    /// The token saved for the daemon at `socketPath`. For the default
    /// socket (no `--socket`) a legacy token stands in when there is none.
    public func session(for socketPath: String, isDefaultSocket: Bool = false) -> String? {
        sessions[socketPath] ?? (isDefaultSocket ? legacySession : nil)
    }

    /// `$XDG_CONFIG_HOME/groser/client.conf`, else `~/.config/groser/client.conf`.
    /// A relative `XDG_CONFIG_HOME` is ignored, as the XDG Base Directory
    /// specification asks.
    public static func defaultPath() -> String {
        let xdg = ProcessInfo.environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil }
        return (xdg ?? (ProcessInfo.homeDirectory + "/.config")) + "/groser/client.conf"
    }

    /// The saved settings, or empty ones when nothing was saved yet.
    public static func load(from path: String = defaultPath()) throws(SettingsError) -> ClientSettings {
        try SettingsFile.read(path)?.settings ?? ClientSettings()
    }

    /// Saves atomically (a reader sees the old file or the new one, never
    /// half), with mode 0600. The keys above are written from this value;
    /// every other line of the existing file is kept. An existing file that
    /// cannot be read or parsed is not replaced.
    public func save(to path: String = defaultPath()) throws(SettingsError) {
        let directory = try Self.directory(of: path)
        let lock: DirectoryLock
        do { lock = try DirectoryLock(directory) } catch { throw SettingsError(path, .cannotSave(error)) }
        try write(to: path)
        _ = lock
    }

    /// Loads, changes and saves the settings while holding a lock on their
    /// directory, so that two clients saving at once (say, sessions with two
    /// daemons) do not drop each other's change. Returns what was saved.
    @discardableResult
    public static func update(at path: String = defaultPath(),
                              _ change: (inout ClientSettings) -> Void) throws(SettingsError) -> ClientSettings {
        let directory = try directory(of: path)
        let lock: DirectoryLock
        do { lock = try DirectoryLock(directory) } catch { throw SettingsError(path, .cannotSave(error)) }
        var settings = try load(from: path)
        change(&settings)
        try settings.write(to: path)
        _ = lock
        return settings
    }

    /// Creates the file's directory (0700) when missing and returns it.
    private static func directory(of path: String) throws(SettingsError) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        let directory = String(path[..<slash])
        do { try Files.makeDirectories(directory, mode: 0o700) } catch { throw SettingsError(path, .cannotSave(error)) }
        return directory
    }

    private func write(to path: String) throws(SettingsError) {
        var entries: [(key: String, value: String)] = []
        if let cityCode { entries.append(("city", cityCode)) }
        if let legacySession { entries.append(("session", legacySession)) }
        for (socket, token) in sessions.sorted(by: { $0.key < $1.key }) {
            entries.append((SettingsFile.sessionPrefix + SettingsFile.encode(socket), token))
        }
        // A value with a line break would smuggle in another key, and one
        // with spaces at its ends would not read back the same.
        for entry in entries where !SettingsFile.isSafeValue(entry.value) {
            throw SettingsError(path, .unsafeValue(key: entry.key))
        }
        let existing = try SettingsFile.read(path)
        var text = existing == nil ? "# groser-client settings\n" : ""
        var pending = entries
        for line in existing?.lines ?? [] {
            guard let key = line.knownKey else {
                text += line.text + "\n"
                continue
            }
            // A known key is rewritten where it was, or dropped when unset.
            if let i = pending.firstIndex(where: { $0.key == key }) {
                text += "\(key)=\(pending[i].value)\n"
                pending.remove(at: i)
            }
        }
        for entry in pending { text += "\(entry.key)=\(entry.value)\n" }
        // 0600: session tokens are secrets.
        do { try Files.writeAtomically(path, Array(text.utf8), mode: 0o600) } catch {
            throw SettingsError(path, .cannotSave(error))
        }
    }
}

/// Why the settings file could not be read, understood or saved. The file
/// is left as it was in every case.
public struct SettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Problem: Sendable, Hashable {
        /// The file exists but could not be read.
        case unreadable(Errno)
        /// Line `line` (from 1) is not a setting this version can read.
        case malformed(line: Int, reason: String)
        /// Writing the new file (or its directory) failed.
        case cannotSave(Errno)
        /// A value to save holds a line break or control character.
        case unsafeValue(key: String)
    }

    /// The settings file.
    public var path: String
    public var problem: Problem

    public init(_ path: String, _ problem: Problem) {
        self.path = path
        self.problem = problem
    }

    public var description: String {
        switch problem {
        case .unreadable(let error):
            "cannot read the settings file \(path): \(error); it was left as it is"
        case .malformed(let line, let reason):
            "the settings file \(path), line \(line): \(reason); fix or remove that line (the file was left as it is)"
        case .cannotSave(let error):
            "saving the settings failed: cannot write \(path): \(error)"
        case .unsafeValue(let key):
            "saving the settings failed: the value of \(key) holds a line break or control character; \(path) was left as it is"
        }
    }
}

/// The file's lines, parsed, with the settings they hold.
private struct SettingsFile {
    struct Line {
        /// The line as written, without its "\n".
        var text: String
        /// The key, when it is one ClientSettings writes.
        var knownKey: String?
    }

    static let sessionPrefix = "session."

    var lines: [Line] = []
    var settings = ClientSettings()

    /// The file parsed; nil when it does not exist.
    static func read(_ path: String) throws(SettingsError) -> SettingsFile? {
        let bytes: [UInt8]
        do {
            guard let read = try Files.read(path) else { return nil }
            bytes = read
        } catch {
            throw SettingsError(path, .unreadable(error))
        }
        var file = SettingsFile()
        var firstLine: [String: Int] = [:]
        var rawLines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if bytes.last == UInt8(ascii: "\n") { rawLines.removeLast() }  // the end of the last line, not a line
        for (index, raw) in rawLines.enumerated() {
            let number = index + 1
            func malformed(_ reason: String) -> SettingsError { SettingsError(path, .malformed(line: number, reason: reason)) }
            guard let text = String(validating: raw, as: UTF8.self) else { throw malformed("it is not UTF-8 text") }
            var line = Line(text: text)
            defer { file.lines.append(line) }
            let content = Substring(text).trimmingSpaces
            if content.isEmpty || content.hasPrefix("#") { continue }
            // Checked before anything of the line is quoted in a message.
            if content.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) {
                throw malformed("it holds a control character")
            }
            guard let eq = content.firstIndex(of: "=") else {
                throw malformed("\"\(abbreviated(content))\" is not a key=value setting (comments start with #)")
            }
            let key = String(content[..<eq].trimmingSpaces)
            let value = String(content[content.index(after: eq)...].trimmingSpaces)
            if key.isEmpty { throw malformed("there is no key before the =") }
            if !isSafeValue(key) || !isSafeValue(value) { throw malformed("it holds a control character") }
            guard key == "city" || key == "session" || key.hasPrefix(sessionPrefix) else { continue }  // kept as it is
            if let first = firstLine[key] { throw malformed("\(key) is set again (first on line \(first))") }
            firstLine[key] = number
            line.knownKey = key
            switch key {
            case "city": file.settings.cityCode = value.isEmpty ? nil : value
            case "session": file.settings.legacySession = value.isEmpty ? nil : value
            default:
                guard let socket = decode(key.dropFirst(sessionPrefix.count)), !socket.isEmpty else {
                    throw malformed("\"\(abbreviated(key))\" does not name a socket path after \"session.\"")
                }
                if !value.isEmpty { file.settings.sessions[socket] = value }
            }
        }
        return file
    }

    /// True when `value` reads back as written.
    static func isSafeValue(_ value: String) -> Bool {
        !value.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
            && value.first != " " && value.last != " "
    }

    /// A socket path as a key: `%`, `=`, space, DEL and control bytes as `%XX`.
    static func encode(_ path: String) -> String {
        var out: [UInt8] = []
        for byte in path.utf8 {
            if byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "=") {
                let hex = Array("0123456789ABCDEF".utf8)
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The path `encode` wrote; nil for a broken escape or invalid UTF-8.
    static func decode(_ key: Substring) -> String? {
        var bytes: [UInt8] = []
        var rest = key.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            bytes.append(value)
            rest = rest.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func abbreviated(_ s: some StringProtocol) -> String {
        s.count <= 40 ? String(s) : String(s.prefix(40)) + "…"
    }
}

