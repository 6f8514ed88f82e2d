/// JSON string literals, written one way everywhere (the CLI's --json, the
/// catalog file, the daemon's JSON logs, groser-bench's reports).
public enum JSONString {
    /// A JSON string literal. Besides what JSON requires (", \\, and
    /// U+0000–U+001F), DEL and the C1 controls (U+0080–U+009F) are written
    /// as \\u00XX too, so the text cannot command a terminal it is shown on.
    public static func quoted(_ s: String) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
