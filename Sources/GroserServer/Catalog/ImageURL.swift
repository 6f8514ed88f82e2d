/// Product image URLs: stored relative, served absolute.
public enum ImageURL {
    /// `url` under `base` (scheme://host[:port][/path]), prefixed once: a
    /// URL that starts with a scheme and "://" passes through unchanged; a
    /// network-path one ("//host/…") gets the base's scheme; any other is
    /// joined to the base by one "/". PROTOCOL.md §10.
    public static func absolute(_ url: String, base: String) -> String {
        if url.isEmpty || base.isEmpty || startsWithScheme(url) { return url }
        if url.hasPrefix("//") {
            guard let colon = base.firstIndex(of: ":") else { return url }
            return String(base[..<colon]) + ":" + url
        }
        var prefix = Substring(base)
        while prefix.hasSuffix("/") { prefix = prefix.dropLast() }
        var path = Substring(url)
        while path.hasPrefix("/") { path = path.dropFirst() }
        return "\(prefix)/\(path)"
    }

    /// RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://".
    static func startsWithScheme(_ url: String) -> Bool {
        let bytes = Array(url.utf8.prefix(64))
        guard let first = bytes.first, (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7a else { return false }
        for (i, b) in bytes.enumerated().dropFirst() {
            if b == UInt8(ascii: ":") { return bytes[i...].starts(with: Array("://".utf8)) }
            let ok = ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a) || (b >= 0x30 && b <= 0x39)
                || b == UInt8(ascii: "+") || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
            if !ok { return false }
        }
        return false
    }
}
