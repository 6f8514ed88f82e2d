import GroserSystem

// Text from the server made safe to print on a terminal.

extension Terminal {
    /// `s` with every control character written out, so that text from the
    /// server (a product name holding `ESC[31m` or `ESC]0;title BEL`) cannot
    /// colour, move, retitle or otherwise command the terminal it is printed
    /// on (as kubectl's CVE-2021-25743). Tab, line feed and carriage return
    /// become `\t`, `\n`, `\r`; the other C0 controls and DEL `\x1b`-style;
    /// C1 controls (U+0080–U+009F, which some terminals obey like ESC
    /// sequences) `\u{9b}`-style, and so are the bidirectional controls and
    /// other invisible formatting characters (`isInvisibleFormatting`: a
    /// U+202E in a name would show the rest of the line reversed); and the
    /// backslash itself `\\`, so that an escape in the output always means a
    /// character that was escaped.
    static func safe(_ s: String) -> String {
        // Most strings need nothing; return them without copying.
        guard s.unicodeScalars.contains(where: needsEscape) else { return s }
        var out = ""
        for scalar in s.unicodeScalars {
            guard needsEscape(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            let hex = String(scalar.value, radix: 16)
            switch scalar {
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default:
                let padded = hex.count == 1 ? "0" + hex : hex
                out += scalar.value < 0x80 ? "\\x" + padded : "\\u{" + padded + "}"
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\\" || scalar.isInvisibleFormatting
    }
}

/// Text for a person's terminal. Literals in it are the client's own;
/// every `String` interpolated into it goes through `Terminal.safe`, so a
/// server string cannot reach the terminal unescaped by being forgotten.
struct TerminalText: ExpressibleByStringInterpolation, Sendable {
    /// The text, safe to write to a terminal.
    private(set) var text: String

    init(stringLiteral value: String) { text = value }

    init(stringInterpolation: StringInterpolation) { text = stringInterpolation.text }

    /// Text its maker has already escaped (a table of `Terminal.safe` cells).
    init(alreadySafe text: String) { self.text = text }

    struct StringInterpolation: StringInterpolationProtocol {
        var text = ""
        init(literalCapacity: Int, interpolationCount: Int) { text.reserveCapacity(literalCapacity * 2) }
        mutating func appendLiteral(_ literal: String) { text += literal }
        /// Any string: escaped.
        mutating func appendInterpolation(_ string: String) { text += Terminal.safe(string) }
        /// Text already made safe: as it is.
        mutating func appendInterpolation(_ safe: TerminalText) { text += safe.text }
        mutating func appendInterpolation(_ number: some BinaryInteger) { text += String(number) }
    }

    static func + (a: TerminalText, b: TerminalText) -> TerminalText { "\(a)\(b)" }
    static func += (a: inout TerminalText, b: TerminalText) { a.text += b.text }

    /// Lines joined with `separator`.
    static func joined(_ parts: [TerminalText], separator: TerminalText = "") -> TerminalText {
        var out: TerminalText = ""
        for (i, part) in parts.enumerated() {
            if i > 0 { out += separator }
            out += part
        }
        return out
    }
}

extension String {
    /// The string with each character `replacements` names written as its
    /// replacement, the rest as they are: for the text formats (a table's
    /// cells, Prometheus labels) in which a few characters would end a field.
    func escaping(_ replacements: KeyValuePairs<Character, String>) -> String {
        var out = ""
        for c in self {
            if let r = replacements.first(where: { $0.key == c }) { out += r.value } else { out.append(c) }
        }
        return out
    }
}
