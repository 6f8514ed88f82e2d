/// Which Snowball algorithm a word takes.
public enum Script: UInt8, Sendable {
    case cyrillic
    case latin
    /// Digits, mixed scripts, other alphabets: not stemmed.
    case other
}

/// One word of a text, normalised: lower case, ё as е, a decimal comma as
/// a point ("3,2" is "3.2"), and a number followed by a unit word joined
/// into a quantity ("900 г" is "900г", "1 l" is "1л").
public struct Token: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        case word
        case number
        /// A number and its unit: "900г", "1.5л".
        case quantity
    }

    /// The normalised word, in UTF-8.
    public var bytes: [UInt8]
    public var kind: Kind
    public var script: Script
    /// Where it is in the text it came from: UTF-8 byte offsets.
    public var start: Int
    public var end: Int

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    init(bytes: [UInt8], kind: Kind, script: Script, start: Int, end: Int) {
        self.bytes = bytes
        self.kind = kind
        self.script = script
        self.start = start
        self.end = end
    }

    init(text: String, kind: Kind, script: Script, start: Int, end: Int) {
        self.init(bytes: Array(text.utf8), kind: kind, script: script, start: start, end: end)
    }
}

/// A word as a dictionary key: its UTF-8 bytes, hashed once with FNV-1a
/// (a String key would be normalised on every hash and comparison, which
/// was a sixth of building an index).
struct WordKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    init(_ text: String) { bytes = Array(text.utf8) }

    func hash(into hasher: inout Hasher) {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        hasher.combine(h)
    }
}

/// Splits text into tokens. Pure: the same text always gives the same tokens.
public enum Tokenizer {
    /// The tokens of `text`, in order. Letters and digits make tokens; a
    /// change from letters to digits splits one ("900г" is "900", "г"); a
    /// comma or point between digits belongs to the number; everything else
    /// separates. A number directly followed by a unit word also gives the
    /// joined quantity (after the number and before the unit word when
    /// `keepParts`, instead of them otherwise).
    public static func tokens(_ text: String, keepParts: Bool = true) -> [Token] {
        let raw = rawTokens(text)
        var out: [Token] = []
        out.reserveCapacity(raw.count + 2)
        var i = 0
        while i < raw.count {
            let t = raw[i]
            if t.kind == .number, i + 1 < raw.count, raw[i + 1].kind == .word, let unit = Units.canonical(raw[i + 1].text) {
                let (number, normalisedUnit) = Units.normalise(number: t.text, unit: unit)
                let q = Token(text: number + normalisedUnit, kind: .quantity, script: .other, start: t.start, end: raw[i + 1].end)
                if keepParts {
                    out.append(t)
                    out.append(q)
                    out.append(raw[i + 1])
                } else {
                    out.append(q)
                }
                i += 2
                continue
            }
            out.append(t)
            i += 1
        }
        return out
    }

    private enum Class { case letter(Script), digit, decimalMark, separator }

    private static func classify(_ s: Unicode.Scalar) -> Class {
        let v = s.value
        if v >= 0x30 && v <= 0x39 { return .digit }
        if (v >= 0x61 && v <= 0x7a) || (v >= 0x41 && v <= 0x5a) { return .letter(.latin) }
        if v >= 0x400 && v <= 0x4ff { return .letter(.cyrillic) }
        if v == 0x2c || v == 0x2e { return .decimalMark }
        if v < 0x80 { return .separator }
        return s.properties.isAlphabetic ? .letter(.other) : .separator
    }

    /// Lower case, ё as е.
    @inline(__always)
    static func fold(_ s: Unicode.Scalar) -> Unicode.Scalar {
        let v = s.value
        if v >= 0x41 && v <= 0x5a { return Unicode.Scalar(v + 0x20)! }
        if v >= 0x410 && v <= 0x42f { return Unicode.Scalar(v + 0x20)! }
        if v == 0x401 || v == 0x451 { return "е" }
        if v < 0x80 || (v >= 0x430 && v <= 0x44f) { return s }
        let lower = s.properties.lowercaseMapping.unicodeScalars
        return lower.count == 1 ? lower.first! : s
    }

    private static func rawTokens(_ text: String) -> [Token] {
        var copy = text
        return copy.withUTF8 { rawTokens(utf8: $0) }
    }

    /// The tokens of UTF-8 text, read byte by byte: scalars are decoded,
    /// folded and written back as UTF-8 into the token being built.
    private static func rawTokens(utf8 input: UnsafeBufferPointer<UInt8>) -> [Token] {
        var out: [Token] = []
        var current: [UInt8] = []
        var kind: Token.Kind = .word
        var script: Script = .other
        var start = 0
        var pendingMark: Int?   // offset of a "," or "." after digits
        func flush(_ end: Int) {
            if !current.isEmpty {
                out.append(Token(bytes: current, kind: kind, script: kind == .number ? .other : script, start: start, end: end))
                current.removeAll(keepingCapacity: true)
            }
        }
        func append(_ s: Unicode.Scalar) {
            let v = s.value
            if v < 0x80 {
                current.append(UInt8(v))
            } else if v < 0x800 {
                current.append(UInt8(0xc0 | (v >> 6)))
                current.append(UInt8(0x80 | (v & 0x3f)))
            } else {
                current.append(contentsOf: Array(String(s).utf8))
            }
        }
        var offset = 0
        while offset < input.count {
            // Decode one scalar.
            let b0 = input[offset]
            var width = 1
            var value = UInt32(b0)
            if b0 >= 0xc0 && b0 < 0xe0 && offset + 1 < input.count {
                value = (UInt32(b0 & 0x1f) << 6) | UInt32(input[offset + 1] & 0x3f)
                width = 2
            } else if b0 >= 0xe0 && b0 < 0xf0 && offset + 2 < input.count {
                value = (UInt32(b0 & 0x0f) << 12) | (UInt32(input[offset + 1] & 0x3f) << 6) | UInt32(input[offset + 2] & 0x3f)
                width = 3
            } else if b0 >= 0xf0 && offset + 3 < input.count {
                value = (UInt32(b0 & 0x07) << 18) | (UInt32(input[offset + 1] & 0x3f) << 12)
                    | (UInt32(input[offset + 2] & 0x3f) << 6) | UInt32(input[offset + 3] & 0x3f)
                width = 4
            }
            let s = Unicode.Scalar(value) ?? "\u{fffd}"
            defer { offset += width }
            switch classify(s) {
            case .digit:
                if !current.isEmpty && kind == .number {
                    if pendingMark != nil {
                        current.append(0x2e)
                        pendingMark = nil
                    }
                    current.append(UInt8(value))
                    continue
                }
                pendingMark = nil
                flush(offset)
                kind = .number
                start = offset
                current.append(UInt8(value))
            case .letter(let sc):
                pendingMark = nil
                if !current.isEmpty && kind == .word {
                    if script != sc { script = .other }
                    append(fold(s))
                    continue
                }
                flush(offset)
                kind = .word
                script = sc
                start = offset
                append(fold(s))
            case .decimalMark:
                if !current.isEmpty && kind == .number && pendingMark == nil {
                    // A mark between digits joins them; the token ends
                    // before it unless a digit follows.
                    pendingMark = offset
                    continue
                }
                if let mark = pendingMark { flush(mark); pendingMark = nil } else { flush(offset) }
            case .separator:
                if let mark = pendingMark { flush(mark); pendingMark = nil } else { flush(offset) }
            }
        }
        if let mark = pendingMark { flush(mark) } else { flush(offset) }
        return out
    }
}

/// Units a quantity may carry, in their canonical Russian forms.
enum Units {
    static func canonical(_ word: String) -> String? {
        switch word {
        case "г", "гр", "g", "gr", "грамм", "граммов": return "г"
        case "кг", "kg": return "кг"
        case "мл", "ml": return "мл"
        case "л", "l", "литр", "литра", "литров": return "л"
        case "шт", "pcs", "pc", "штук", "штуки": return "шт"
        default: return nil
        }
    }

    /// A number with a unit as its token text: "900" + "г"; decimals keep
    /// their point, trailing zeros dropped ("1.50" is "1.5").
    static func normalise(number: String, unit: String) -> (String, String) {
        guard number.contains(".") else { return (trimLeadingZeros(number), unit) }
        var n = number
        while n.hasSuffix("0") { n.removeLast() }
        if n.hasSuffix(".") { n.removeLast() }
        return (trimLeadingZeros(n), unit)
    }

    private static func trimLeadingZeros(_ n: String) -> String {
        var s = Substring(n)
        while s.count > 1 && s.hasPrefix("0") && !s.dropFirst().hasPrefix(".") { s = s.dropFirst() }
        return String(s)
    }

    /// The quantity tokens a product's pack size gives: "930мл" and
    /// "0.93л"; "1000г" and "1кг"; "10шт".
    static func packTokens(unit: String, size: UInt32) -> [String] {
        guard size > 0 else { return [] }
        switch unit {
        case "ml": return ["\(size)мл", thousandths(size) + "л"]
        case "g": return ["\(size)г", thousandths(size) + "кг"]
        case "pcs": return ["\(size)шт"]
        default: return []
        }
    }

    /// `size` / 1000 in decimal, without trailing zeros: 930 is "0.93".
    private static func thousandths(_ size: UInt32) -> String {
        let whole = size / 1000, rest = size % 1000
        guard rest > 0 else { return "\(whole)" }
        var frac = String(rest)
        frac = String(repeating: "0", count: 3 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return "\(whole).\(frac)"
    }
}

/// A query typed with the wrong keyboard layout: the key positions of the
/// Russian ЙЦУКЕН layout and the English QWERTY one.
public enum KeyboardLayout {
    private static let latin = Array("qwertyuiop[]asdfghjkl;'zxcvbnm,.`".unicodeScalars)
    private static let cyrillic = Array("йцукенгшщзхъфывапролджэячсмитьбюё".unicodeScalars)
    private static let toCyrillic: [Unicode.Scalar: Unicode.Scalar] = {
        var m: [Unicode.Scalar: Unicode.Scalar] = [:]
        for (l, c) in zip(latin, cyrillic) { m[l] = c }
        for (l, c) in zip("QWERTYUIOP{}ASDFGHJKL:\"ZXCVBNM<>~".unicodeScalars, "ЙЦУКЕНГШЩЗХЪФЫВАПРОЛДЖЭЯЧСМИТЬБЮЁ".unicodeScalars) { m[l] = c }
        return m
    }()
    private static let toLatin: [Unicode.Scalar: Unicode.Scalar] = {
        var m: [Unicode.Scalar: Unicode.Scalar] = [:]
        for (l, c) in toCyrillic { m[c] = l }
        return m
    }()

    /// `text` as the other layout would have typed it: Latin letters (and
    /// the punctuation on Russian letter keys) become Cyrillic when the text
    /// has Latin letters, Cyrillic becomes Latin otherwise. Nil when there
    /// is nothing to switch.
    public static func switched(_ text: String) -> String? {
        var hasLatin = false, hasCyrillic = false
        for s in text.unicodeScalars {
            let v = s.value
            if (v >= 0x61 && v <= 0x7a) || (v >= 0x41 && v <= 0x5a) { hasLatin = true }
            if v >= 0x400 && v <= 0x4ff { hasCyrillic = true }
        }
        guard hasLatin || hasCyrillic else { return nil }
        let map = hasLatin ? toCyrillic : toLatin
        let scalars = Array(text.unicodeScalars)
        func isLatinLetter(_ i: Int) -> Bool {
            guard i >= 0 && i < scalars.count else { return false }
            let v = scalars[i].value
            return (v >= 0x61 && v <= 0x7a) || (v >= 0x41 && v <= 0x5a)
        }
        var out = String.UnicodeScalarView()
        for (i, s) in scalars.enumerated() {
            guard let m = map[s] else { out.append(s); continue }
            if s.properties.isAlphabetic {
                out.append(m)
            } else if hasLatin && (isLatinLetter(i - 1) || isLatinLetter(i + 1)) {
                // The punctuation on Russian letter keys ("," is б, ";" is
                // ж) only next to letters: "3,2" stays a number.
                out.append(m)
            } else {
                out.append(s)
            }
        }
        let result = String(out)
        return result == text ? nil : result
    }
}
