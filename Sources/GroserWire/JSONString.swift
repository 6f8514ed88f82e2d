/// JSON string literals, written one way everywhere (the CLI's --json, the
/// catalog file, the daemon's JSON logs, groser-bench's reports).
public enum JSONString {
    /// A JSON string literal. Besides what JSON requires (", \\, and
    /// U+0000–U+001F), DEL, the C1 controls (U+0080–U+009F) and the
    /// invisible formatting characters (`isInvisibleFormatting`: U+202E and
    /// the other bidirectional controls among them) are written as \\uXXXX
    /// too (a surrogate pair above U+FFFF), so the text cannot command or
    /// reorder a terminal it is shown on.
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
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.isInvisibleFormatting {
                    if scalar.value > 0xFFFF {
                        let v = scalar.value - 0x1_0000
                        out += unicodeEscape(0xD800 + (v >> 10)) + unicodeEscape(0xDC00 + (v & 0x3FF))
                    } else {
                        out += unicodeEscape(scalar.value)
                    }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// `\\uXXXX` for a UTF-16 code unit.
    private static func unicodeEscape(_ unit: UInt32) -> String {
        let hex = String(unit, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    }
}
