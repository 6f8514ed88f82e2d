import GroserClient
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// The catalog file format (docs/CATALOG.md): JSON Lines read strictly into
/// records, and records written in the canonical form.
enum CatalogFile {
    static let format = 1
    static let maximumLineBytes = 65_536

    /// What one line holds.
    enum Line {
        case header
        case record(CatalogRecord)
        case end(records: Int)
    }

    /// Reads one line (without its `\n`).
    static func parse(_ line: ArraySlice<UInt8>) throws(LineError) -> Line {
        guard line.count <= maximumLineBytes else { throw LineError("the line is longer than \(maximumLineBytes) bytes") }
        guard !line.contains(0x0d) else { throw LineError("the line holds a \\r (the file went through a CRLF conversion?)") }
        var parser = JSONParser(line)
        let object = try parser.document()
        var fields = Fields(object)
        let type = try fields.string("type")
        do {
            return try parseFields(type, &fields)
        } catch {
            // A record's error names the record (docs/CATALOG.md §7), and the
            // line still counts as one of the records the end record counts.
            guard recordTypes.contains(type) else { throw error }
            var name = type
            if let (_, value) = object.first(where: { $0.0 == "uid" }), case .string(let uid) = value { name += " \(uid)" }
            throw LineError("\(name): \(error.reason)", isRecord: true)
        }
    }

    /// The types of the lines the end record counts.
    static let recordTypes: Set<String> = ["city", "store", "department", "shelf", "product"]

    private static func parseFields(_ type: String, _ fields: inout Fields) throws(LineError) -> Line {
        // An unknown field is named first: a typo is the likely cause of a missing one.
        if let allowed = keys[type] { try fields.allowOnly(allowed) }
        let result: Line
        switch type {
        case "catalog":
            let f = try fields.integer("format")
            guard f == UInt64(format) else { throw LineError("unsupported catalog format \(f); this groser-client reads format \(format)") }
            result = .header
        case "end":
            result = .end(records: Int(clamping: try fields.integer("records")))
        case "city":
            result = .record(.city(City(uid: try fields.string("uid"), code: try fields.string("code"), name: try fields.string("name"),
                                        stores: [], defaultStoreUID: try fields.string("default_store_uid"))))
        case "store":
            result = .record(.store(StoreSummary(uid: try fields.string("uid"), name: try fields.string("name"),
                                                 chain: try fields.string("chain"), address: try fields.string("address"),
                                                 cityUID: try fields.string("city_uid"))))
        case "department":
            result = .record(.department(CatalogDepartment(uid: try fields.string("uid"), storeUID: try fields.string("store_uid"),
                                                           name: try fields.string("name"))))
        case "shelf":
            result = .record(.shelf(CatalogShelf(uid: try fields.string("uid"), departmentUID: try fields.string("department_uid"),
                                                 name: try fields.string("name"))))
        case "product":
            var price = Fields(try fields.object("price"), path: "price.")
            let minor = try price.integer("minor_units")
            guard minor <= UInt64(Int64.max) else { throw LineError("price.minor_units is larger than 2^63 - 1") }
            let currency = try price.string("currency")
            try price.noneLeft()
            let stock = try fields.integer("stock")
            guard stock <= UInt64(UInt32.max) else { throw LineError("stock is larger than 4294967295") }
            let size = try fields.integer("unit_size")
            guard size <= UInt64(UInt32.max) else { throw LineError("unit_size is larger than 4294967295") }
            let product = Product(uid: try fields.string("uid"), name: try fields.string("name"), brand: try fields.string("brand"),
                                  unit: try fields.string("unit"), unitSize: UInt32(size),
                                  price: Money(minorUnits: Int64(minor), currency: currency),
                                  imageURL: try fields.string("image_url"), outOfStock: stock == 0,
                                  oftenOutOfStock: try fields.bool("often_out_of_stock"), shelfUID: try fields.string("shelf_uid"))
            result = .record(.product(CatalogProduct(product: product, stock: UInt32(stock),
                                                     barcode: try fields.optionalString("barcode") ?? "")))
        default:
            throw LineError("unknown record type \"\(type)\"")
        }
        try fields.noneLeft()
        return result
    }

    /// Each type's fields (docs/CATALOG.md §4), "type" aside.
    static let keys: [String: Set<String>] = [
        "catalog": ["format"], "end": ["records"],
        "city": ["uid", "code", "name", "default_store_uid"],
        "store": ["uid", "city_uid", "name", "chain", "address"],
        "department": ["uid", "store_uid", "name"],
        "shelf": ["uid", "department_uid", "name"],
        "product": ["uid", "shelf_uid", "name", "brand", "unit", "unit_size", "price", "image_url", "stock",
                    "often_out_of_stock", "barcode"],
    ]

    // MARK: Canonical form

    static let header = "{\"type\":\"catalog\",\"format\":1}"

    /// The record's canonical line (docs/CATALOG.md §8), without its `\n`.
    static func canonical(_ record: CatalogRecord) -> String {
        var w = Writer()
        switch record {
        case .city(let c):
            w.begin("city"); w.string("uid", c.uid); w.string("code", c.code); w.string("name", c.name)
            w.string("default_store_uid", c.defaultStoreUID)
        case .store(let s):
            w.begin("store"); w.string("uid", s.uid); w.string("city_uid", s.cityUID); w.string("name", s.name)
            w.string("chain", s.chain); w.string("address", s.address)
        case .department(let d):
            w.begin("department"); w.string("uid", d.uid); w.string("store_uid", d.storeUID); w.string("name", d.name)
        case .shelf(let h):
            w.begin("shelf"); w.string("uid", h.uid); w.string("department_uid", h.departmentUID); w.string("name", h.name)
        case .product(let v):
            let p = v.product
            w.begin("product"); w.string("uid", p.uid); w.string("shelf_uid", p.shelfUID); w.string("name", p.name)
            w.string("brand", p.brand); w.string("unit", p.unit); w.raw("unit_size", String(p.unitSize))
            w.raw("price", "{\"minor_units\":\(p.price.minorUnits),\"currency\":\(Writer.quote(p.price.currency))}")
            w.string("image_url", p.imageURL); w.raw("stock", String(v.stock))
            w.raw("often_out_of_stock", p.oftenOutOfStock ? "true" : "false")
            if !v.barcode.isEmpty { w.string("barcode", v.barcode) }
        }
        return w.text + "}"
    }

    static func end(records: Int) -> String { "{\"type\":\"end\",\"records\":\(records)}" }

    private struct Writer {
        var text = ""
        mutating func begin(_ type: String) { text = "{\"type\":\"\(type)\"" }
        mutating func string(_ key: String, _ value: String) { text += ",\"\(key)\":" + Self.quote(value) }
        mutating func raw(_ key: String, _ value: String) { text += ",\"\(key)\":" + value }
        /// Control characters cannot occur (§5.2); should a catalog hold
        /// one anyway, it is escaped like every other JSON string groser writes.
        static func quote(_ s: String) -> String { JSONString.quoted(s) }
    }
}

/// Why a line could not be read.
struct LineError: Error {
    var reason: String
    /// The line is a record (city, store, ...) that could not be read: the
    /// end record counts it all the same.
    var isRecord = false
    init(_ reason: String, isRecord: Bool = false) {
        self.reason = reason
        self.isRecord = isRecord
    }
}

/// A JSON value as the catalog format allows it.
enum JSONValue {
    case string(String)
    case integer(UInt64)
    case bool(Bool)
    case object([(String, JSONValue)])
    /// Numbers that are not plain integers, arrays, null: named for the error.
    case other(String)
}

/// An object's fields, taken one by one; what is left is unknown.
struct Fields {
    private var items: [(String, JSONValue)]
    private let path: String

    init(_ object: [(String, JSONValue)], path: String = "") {
        items = object
        self.path = path
    }

    private mutating func take(_ key: String) -> JSONValue? {
        guard let i = items.firstIndex(where: { $0.0 == key }) else { return nil }
        return items.remove(at: i).1
    }

    private func describe(_ v: JSONValue) -> String {
        switch v {
        case .string(let s): "a string \"\(s.prefix(20))\""
        case .integer(let n): "the integer \(n)"
        case .bool(let b): "\(b)"
        case .object: "an object"
        case .other(let what): what
        }
    }

    mutating func string(_ key: String) throws(LineError) -> String {
        guard let v = take(key) else { throw LineError("missing field \"\(path)\(key)\"") }
        guard case .string(let s) = v else { throw LineError("\(path)\(key) must be a string, not \(describe(v))") }
        return s
    }

    mutating func optionalString(_ key: String) throws(LineError) -> String? {
        guard items.contains(where: { $0.0 == key }) else { return nil }
        return try string(key)
    }

    mutating func integer(_ key: String) throws(LineError) -> UInt64 {
        guard let v = take(key) else { throw LineError("missing field \"\(path)\(key)\"") }
        guard case .integer(let n) = v else { throw LineError("\(path)\(key) must be an integer, not \(describe(v))") }
        return n
    }

    mutating func bool(_ key: String) throws(LineError) -> Bool {
        guard let v = take(key) else { throw LineError("missing field \"\(path)\(key)\"") }
        guard case .bool(let b) = v else { throw LineError("\(path)\(key) must be true or false, not \(describe(v))") }
        return b
    }

    mutating func object(_ key: String) throws(LineError) -> [(String, JSONValue)] {
        guard let v = take(key) else { throw LineError("missing field \"\(path)\(key)\"") }
        guard case .object(let o) = v else { throw LineError("\(path)\(key) must be an object, not \(describe(v))") }
        return o
    }

    func allowOnly(_ keys: Set<String>) throws(LineError) {
        if let (key, _) = items.first(where: { !keys.contains($0.0) }) { throw LineError("unknown field \"\(path)\(key)\"") }
    }

    func noneLeft() throws(LineError) {
        if let (key, _) = items.first { throw LineError("unknown field \"\(path)\(key)\"") }
    }
}

/// A strict JSON reader for one line: objects, strings, unsigned integers,
/// booleans; no null, no duplicate keys, nothing after the object.
struct JSONParser {
    private let bytes: ArraySlice<UInt8>
    private var i: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        i = bytes.startIndex
    }

    mutating func document() throws(LineError) -> [(String, JSONValue)] {
        skipSpace()
        guard peek == UInt8(ascii: "{") else { throw fail("not a JSON object") }
        guard case .object(let o) = try value(depth: 0) else { throw fail("not a JSON object") }
        skipSpace()
        guard i == bytes.endIndex else { throw fail("text after the object") }
        return o
    }

    private var peek: UInt8? { i < bytes.endIndex ? bytes[i] : nil }

    private func fail(_ what: String) -> LineError {
        LineError("not valid JSON: \(what) at byte \(i - bytes.startIndex + 1)")
    }

    private mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x09 { i += 1 }
    }

    private mutating func expect(_ c: Character) throws(LineError) {
        skipSpace()
        guard peek == c.asciiValue else { throw fail("expected '\(c)'") }
        i += 1
    }

    private mutating func value(depth: Int) throws(LineError) -> JSONValue {
        skipSpace()
        guard let b = peek else { throw fail("unexpected end of line") }
        switch b {
        case UInt8(ascii: "{"):
            guard depth < 4 else { throw fail("objects nested too deep") }
            i += 1
            var fields: [(String, JSONValue)] = []
            skipSpace()
            if peek == UInt8(ascii: "}") { i += 1; return .object(fields) }
            while true {
                skipSpace()
                guard peek == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try string()
                if fields.contains(where: { $0.0 == key }) { throw LineError("duplicate key \"\(key)\"") }
                try expect(":")
                fields.append((key, try value(depth: depth + 1)))
                skipSpace()
                if peek == UInt8(ascii: ",") { i += 1; continue }
                if peek == UInt8(ascii: "}") { i += 1; return .object(fields) }
                throw fail("expected ',' or '}'")
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            for (word, v) in [("true", JSONValue.bool(true)), ("false", .bool(false)), ("null", .other("null"))] {
                let w = Array(word.utf8)
                if bytes[i...].starts(with: w) { i += w.count; return v }
            }
            throw fail("unexpected word")
        case UInt8(ascii: "["):
            throw LineError("arrays are not part of the catalog format")
        default:
            return try number()
        }
    }

    private mutating func number() throws(LineError) -> JSONValue {
        let start = i
        while let b = peek, (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+")
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { i += 1 }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        guard !text.isEmpty else { throw fail("unexpected character") }
        let digits = text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        guard digits, text == "0" || text.first != "0", let n = UInt64(text) else { return .other(text) }
        return .integer(n)
    }

    private mutating func string() throws(LineError) -> String {
        i += 1  // the opening quote
        var out: [UInt8] = []
        while true {
            guard let b = peek else { throw fail("unterminated string") }
            i += 1
            switch b {
            case UInt8(ascii: "\""):
                guard let s = String(validating: out, as: UTF8.self) else { throw LineError("a string is not valid UTF-8") }
                return s
            case UInt8(ascii: "\\"):
                guard let e = peek else { throw fail("unterminated escape") }
                i += 1
                switch e {
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard bytes[i...].starts(with: Array("\\u".utf8)) else { throw fail("a lone surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("a lone surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("a bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default:
                    guard let plain = JSON.escapedByte(e) else { throw fail("a bad escape") }
                    out.append(plain)
                }
            default:
                guard b >= 0x20 else { throw fail("a control character in a string") }
                out.append(b)
            }
        }
    }

    private mutating func hex4() throws(LineError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let b = peek else { throw fail("a short \\u escape") }
            i += 1
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x41...0x46: d = UInt32(b - 0x41 + 10)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            default: throw fail("a bad \\u escape")
            }
            v = v << 4 | d
        }
        return v
    }
}

/// Reads a file line by line, in bounded memory.
struct LineReader {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEOF = false
    private(set) var lineNumber = 0
    /// Bytes read so far, for progress.
    private(set) var bytesRead = 0

    init(path: String) throws(Errno) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno.current }
        self.fd = fd
    }

    func close() { _ = Glibc.close(fd) }

    /// The next line without its `\n`, and whether it had one; nil at the end.
    mutating func next() throws(Errno) -> (line: ArraySlice<UInt8>, terminated: Bool)? {
        while true {
            if let nl = buffer[start...].firstIndex(of: 0x0a) {
                let line = buffer[start..<nl]
                start = nl + 1
                lineNumber += 1
                return (line, true)
            }
            if atEOF {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                start = buffer.count
                lineNumber += 1
                return (line, false)
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            let n = try syscall { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }
            if n == 0 { atEOF = true } else { buffer.append(contentsOf: chunk[0..<n]); bytesRead += n }
        }
    }
}
