/// A JSON value with object keys kept in the order written, so output is
/// stable and a reader can report where a key was. Numbers are kept as their
/// text: a 64-bit integer is never rounded through a Double.
public indirect enum JSON: Sendable, Equatable {
    case object([(String, JSON)])
    case array([JSON])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)): return x.elementsEqual(y) { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.array(let x), .array(let y)): return x == y
        case (.string(let x), .string(let y)), (.number(let x), .number(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    /// Pretty-printed with two-space indents, `"key": value`.
    public func rendered(indent: String = "") -> String {
        switch self {
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            let inner = indent + "  "
            let body = fields.map { "\(inner)\(JSONString.quoted($0.0)): \($0.1.rendered(indent: inner))" }
            return "{\n" + body.joined(separator: ",\n") + "\n\(indent)}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            let inner = indent + "  "
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .string(let s): return JSONString.quoted(s)
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        }
    }

    /// On one line, with no spaces (JSON Lines).
    public func compact() -> String {
        switch self {
        case .object(let fields): return "{" + fields.map { JSONString.quoted($0.0) + ":" + $0.1.compact() }.joined(separator: ",") + "}"
        case .array(let items): return "[" + items.map { $0.compact() }.joined(separator: ",") + "]"
        default: return rendered()
        }
    }

    /// The value of `key` in an object; nil for a missing key or a non-object.
    public subscript(_ key: String) -> JSON? {
        guard case .object(let fields) = self else { return nil }
        return fields.first { $0.0 == key }?.1
    }
}

/// Why a text is not JSON, and where: 1-based line and column (in
/// characters, counted as Unicode scalars).
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var reason: String

    public var description: String { "line \(line), column \(column): \(reason)" }
}

extension JSON {
    /// Reads one JSON document strictly (RFC 8259): no comments, no trailing
    /// commas, no leading zeros, no raw control characters in strings, no
    /// lone surrogates, and no key given twice in one object (a request with
    /// two values for one field is more likely a mistake than a wish).
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSON {
        var parser = JSONParser(Array(text.utf8))
        return try parser.document()
    }
}

extension JSON {
    /// The byte a one-letter escape after a backslash in a JSON string
    /// stands for (\" \\ \/ \b \f \n \r \t); nil for anything else, \u
    /// (which four hex digits follow) included.
    public static func escapedByte(_ letter: UInt8) -> UInt8? {
        switch letter {
        case UInt8(ascii: "\""): 0x22
        case UInt8(ascii: "\\"): 0x5C
        case UInt8(ascii: "/"): 0x2F
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var i = 0
    /// How deep objects and arrays may nest before the text is refused,
    /// so a hostile file cannot exhaust the stack.
    static let maximumDepth = 128

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func document() throws(JSONSyntaxError) -> JSON {
        skipSpace()
        let v = try value(depth: 0)
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected text after the JSON value") }
        return v
    }

    /// The position of byte `at` as a line and a column of Unicode scalars.
    func fail(_ reason: String, at: Int? = nil) -> JSONSyntaxError {
        let end = min(at ?? i, bytes.count)
        var line = 1, column = 1
        for b in bytes[..<end] {
            if b == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        return JSONSyntaxError(line: line, column: column, reason: reason)
    }

    var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

    mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { i += 1 }
    }

    mutating func expect(_ c: Character) throws(JSONSyntaxError) {
        guard peek == c.asciiValue else {
            throw fail(peek == nil ? "the text ends where \"\(c)\" was expected" : "expected \"\(c)\"")
        }
        i += 1
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSON {
        guard depth < Self.maximumDepth else { throw fail("nested more than \(Self.maximumDepth) levels deep") }
        guard let b = peek else { throw fail("the text ends where a value was expected") }
        switch b {
        case UInt8(ascii: "{"):
            i += 1
            var fields: [(String, JSON)] = []
            var seen: Set<String> = []
            skipSpace()
            if peek == UInt8(ascii: "}") { i += 1; return .object([]) }
            while true {
                skipSpace()
                let keyStart = i
                guard peek == UInt8(ascii: "\"") else { throw fail("expected a string key in quotes") }
                let key = try string()
                guard seen.insert(key).inserted else { throw fail("the key \"\(key)\" is given twice", at: keyStart) }
                skipSpace()
                try expect(":")
                skipSpace()
                fields.append((key, try value(depth: depth + 1)))
                skipSpace()
                if peek == UInt8(ascii: ",") { i += 1; continue }
                try expect("}")
                return .object(fields)
            }
        case UInt8(ascii: "["):
            i += 1
            var items: [JSON] = []
            skipSpace()
            if peek == UInt8(ascii: "]") { i += 1; return .array([]) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                if peek == UInt8(ascii: ",") { i += 1; continue }
                try expect("]")
                return .array(items)
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try number())
        default:
            for (word, v) in [("true", JSON.bool(true)), ("false", .bool(false)), ("null", .null)] {
                let w = Array(word.utf8)
                if bytes.count - i >= w.count && Array(bytes[i..<i + w.count]) == w {
                    i += w.count
                    return v
                }
            }
            throw fail("unexpected character; expected a value")
        }
    }

    mutating func number() throws(JSONSyntaxError) -> String {
        let start = i
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.i
            while let b = p.peek, b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") { p.i += 1 }
            return p.i - s
        }
        if peek == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        let n = digits(&self)
        guard n > 0 else { throw fail("a number needs digits") }
        if n > 1 && bytes[intStart] == UInt8(ascii: "0") { throw fail("a number cannot start with 0", at: intStart) }
        if peek == UInt8(ascii: ".") {
            i += 1
            guard digits(&self) > 0 else { throw fail("a decimal point needs digits after it") }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            i += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
            guard digits(&self) > 0 else { throw fail("an exponent needs digits") }
        }
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - i >= 4 else { throw fail("\\u needs four hex digits") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail("\\u needs four hex digits")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        i += 1  // the opening quote
        var out: [UInt8] = []
        while true {
            guard let b = peek else { throw fail("the text ends inside a string") }
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                // The input came from a Swift String, so its bytes are valid UTF-8.
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                i += 1
                guard let e = peek else { throw fail("the text ends inside a string") }
                i += 1
                switch e {
                case UInt8(ascii: "u"):
                    let escapeStart = i - 2
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard bytes.count - i >= 2, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                            throw fail("a lone surrogate \\u escape", at: escapeStart)
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("a lone surrogate \\u escape", at: escapeStart) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("a lone surrogate \\u escape", at: escapeStart)
                    }
                    out += Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    guard let plain = JSON.escapedByte(e) else {
                        throw fail("an unknown escape \\\(Character(Unicode.Scalar(e)))", at: i - 2)
                    }
                    out.append(plain)
                }
            default:
                guard b >= 0x20 else { throw fail("a control character inside a string must be escaped") }
                out.append(b)
                i += 1
            }
        }
    }
}
