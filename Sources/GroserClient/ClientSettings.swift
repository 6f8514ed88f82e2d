import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// What the client remembers between runs, like the app remembers the
/// chosen city: a small `key=value` file under `$XDG_CONFIG_HOME/groser/`
/// (else `~/.config/groser/`), replaced atomically on every save.
public struct ClientSettings: Sendable, Hashable {
    /// The selected city's code, e.g. "SPB".
    public var cityCode: String?
    /// The customer session token from OpenSession, so carts continue across runs.
    public var session: String?

    public init(cityCode: String? = nil, session: String? = nil) {
        self.cityCode = cityCode
        self.session = session
    }

    /// `$XDG_CONFIG_HOME/groser/client.conf`, else `~/.config/groser/client.conf`.
    public static func defaultPath() -> String {
        let base = ProcessInfo.environment("XDG_CONFIG_HOME") ?? (ProcessInfo.homeDirectory + "/.config")
        return base + "/groser/client.conf"
    }

    /// The saved settings, or empty ones when nothing was saved yet.
    public static func load(from path: String = defaultPath()) throws(Errno) -> ClientSettings {
        guard let bytes = try Files.read(path) else { return ClientSettings() }
        var settings = ClientSettings()
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces
            let value = line[line.index(after: eq)...].trimmingSpaces
            if key == "city", !value.isEmpty { settings.cityCode = String(value) }
            if key == "session", !value.isEmpty { settings.session = String(value) }
        }
        return settings
    }

    /// Saves atomically: a reader sees the old file or the new one, never half.
    public func save(to path: String = defaultPath()) throws(Errno) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try Files.makeDirectories(String(path[..<slash]), mode: 0o700)
        }
        // A value with a line break would smuggle in another key.
        for value in [cityCode, session].compactMap({ $0 }) where value.contains(where: \.isNewline) {
            throw Errno(rawValue: EINVAL)
        }
        var text = "# groser-client settings\n"
        if let cityCode { text += "city=\(cityCode)\n" }
        if let session { text += "session=\(session)\n" }
        // 0600: the session token is a secret.
        try Files.writeAtomically(path, Array(text.utf8), mode: 0o600)
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" || s.last == "\r" { s = s.dropLast() }
        return s
    }
}
