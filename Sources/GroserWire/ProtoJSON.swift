/// Protobuf's canonical JSON mapping (proto3), for any message compiled in,
/// driven by the descriptors (`ProtoSchema`): what Google's
/// `json_format.MessageToJson` writes by default, and what `json_format.Parse`
/// reads. lowerCamelCase names; fields without presence left out when they
/// hold their default; 64-bit integers as strings; enums by name; bytes as
/// base64; repeated fields as arrays; a oneof member when it is set.
public enum ProtoJSON {
    // MARK: Message to JSON

    /// The message as JSON. `emitDefaults` also writes the fields without
    /// presence that hold their default (`[]` for repeated ones), as
    /// json_format's `always_print_fields_with_no_presence` does; unset
    /// message fields and oneof members stay out either way.
    public static func json(_ message: ProtoMessage, emitDefaults: Bool = false) -> JSON {
        let info = message.info
        var pairs: [(String, JSON)] = []
        for f in info.fields {
            if let values = message.fields[f.number], !values.isEmpty {
                pairs.append((f.jsonName, f.isRepeated ? .array(values.map { json($0, f.type, emitDefaults) })
                                                        : json(values[0], f.type, emitDefaults)))
            } else if emitDefaults && !f.hasPresence {
                pairs.append((f.jsonName, f.isRepeated ? .array([]) : defaultJSON(f.type)))
            }
        }
        return .object(pairs)
    }

    private static func json(_ v: ProtoValue, _ type: ProtoFieldType, _ emitDefaults: Bool) -> JSON {
        switch v {
        case .int(let n): return type.isJSON64Bit ? .string(String(n)) : .number(String(n))
        case .uint(let n): return type.isJSON64Bit ? .string(String(n)) : .number(String(n))
        case .double(let d):
            if d.isNaN { return .string("NaN") }
            if d.isInfinite { return .string(d < 0 ? "-Infinity" : "Infinity") }
            // The shortest text that reads back as the same float or double.
            let text = type == .float ? Float(d).description : d.description
            return .number(text)
        case .bool(let b): return .bool(b)
        case .string(let s): return .string(s)
        case .bytes(let b): return .string(Base64.encode(b))
        case .enumeration(let n):
            if case .enumeration(let name) = type, let value = ProtoSchema.enumeration(named: name)?.name(of: n) {
                return .string(value)
            }
            return .number(String(n))  // a number the enum does not declare, as json_format writes it
        case .message(let m): return json(m, emitDefaults: emitDefaults)
        }
    }

    private static func defaultJSON(_ type: ProtoFieldType) -> JSON {
        switch type {
        case .bool: return .bool(false)
        case .string, .bytes: return .string("")
        case .enumeration(let name): return ProtoSchema.enumeration(named: name)?.name(of: 0).map(JSON.string) ?? .number("0")
        case .message: return .null
        case let t where t.isJSON64Bit: return .string("0")
        default: return .number("0")
        }
    }

    // MARK: JSON to message

    /// Reads `json` into the message `typeName` as json_format.Parse does:
    /// field names in lowerCamelCase or as in the `.proto`; integers as
    /// numbers or strings; enums by name or number; bytes as base64
    /// (standard or URL-safe); `null` for "not set". An unknown field, a
    /// field named twice, two members of one oneof, or a value of the wrong
    /// kind or out of range is refused with the path to it.
    public static func message(from json: JSON, type typeName: String) throws(ProtoJSONError) -> ProtoMessage {
        guard let info = ProtoSchema.message(named: typeName) else {
            throw ProtoJSONError("no message type \(typeName) is compiled in", path: "")
        }
        return try message(json, info, path: "")
    }

    private static func message(_ json: JSON, _ info: ProtoMessageInfo, path: String) throws(ProtoJSONError) -> ProtoMessage {
        guard case .object(let pairs) = json else {
            throw ProtoJSONError("expected a JSON object for \(info.fullName)", path: path)
        }
        var m = ProtoMessage(info.fullName)
        var named: [UInt32: String] = [:]
        var oneofs: [Int: String] = [:]
        for (key, value) in pairs {
            let here = path.isEmpty ? key : path + "." + key
            guard let f = info.field(named: key) else {
                throw ProtoJSONError("unknown field \"\(key)\" in \(info.fullName)", path: here, unknownField: key)
            }
            if let earlier = named[f.number] {
                throw ProtoJSONError("the field is given twice, as \"\(earlier)\" and \"\(key)\"", path: here)
            }
            named[f.number] = key
            if value == .null { continue }
            if let o = f.oneofIndex {
                if let other = oneofs[o] {
                    throw ProtoJSONError("\"\(other)\" and \"\(key)\" are in the same oneof: give one", path: here)
                }
                oneofs[o] = key
            }
            if f.isRepeated {
                guard case .array(let items) = value else { throw ProtoJSONError("expected an array", path: here) }
                var values: [ProtoValue] = []
                for (n, item) in items.enumerated() {
                    values.append(try self.value(item, f, path: "\(here)[\(n)]"))
                }
                if !values.isEmpty { m.fields[f.number] = values }
            } else {
                let v = try self.value(value, f, path: here)
                if f.hasPresence || !v.isDefault { m.fields[f.number] = [v] }
            }
        }
        return m
    }

    private static func value(_ json: JSON, _ f: ProtoFieldInfo, path: String) throws(ProtoJSONError) -> ProtoValue {
        func wrong(_ expected: String) -> ProtoJSONError {
            ProtoJSONError("expected \(expected) for the \(f.type.protoName) field \(f.name)", path: path)
        }
        switch f.type {
        case .int32, .sint32, .sfixed32, .int64, .sint64, .sfixed64:
            guard let n = integerText(json).flatMap(Self.int64) else { throw wrong("an integer (a number or a string)") }
            if !f.type.isJSON64Bit && Int64(Int32(truncatingIfNeeded: n)) != n { throw wrong("an integer within 32 bits") }
            return .int(n)
        case .uint32, .fixed32, .uint64, .fixed64:
            guard let n = integerText(json).flatMap(Self.uint64) else { throw wrong("a non-negative integer (a number or a string)") }
            if !f.type.isJSON64Bit && n > UInt64(UInt32.max) { throw wrong("a non-negative integer within 32 bits") }
            return .uint(n)
        case .float, .double:
            let d: Double?
            switch json {
            case .number(let t): d = Double(t)
            case .string("NaN"): d = .nan
            case .string("Infinity"): d = .infinity
            case .string("-Infinity"): d = -.infinity
            case .string(let t): d = Double(t)
            default: d = nil
            }
            guard let d else { throw wrong("a number") }
            if f.type == .float && d.isFinite && abs(d) > Double(Float.greatestFiniteMagnitude) { throw wrong("a number within float's range") }
            return .double(d)
        case .bool:
            guard case .bool(let b) = json else { throw wrong("true or false") }
            return .bool(b)
        case .string:
            guard case .string(let s) = json else { throw wrong("a string") }
            return .string(s)
        case .bytes:
            guard case .string(let s) = json, let b = Base64.decode(s) else { throw wrong("base64 text") }
            return .bytes(b)
        case .enumeration(let name):
            let e = ProtoSchema.enumeration(named: name)
            switch json {
            case .string(let s):
                guard let v = e?.values.first(where: { $0.name == s }) else {
                    let names = e?.values.map(\.name).joined(separator: ", ") ?? ""
                    throw ProtoJSONError("\"\(s)\" is not a value of \(name) (\(names))", path: path)
                }
                return .enumeration(v.number)
            case .number(let t):
                guard let n = Int32(t) else { throw wrong("an enum value's name or number") }
                return .enumeration(n)
            default:
                throw wrong("an enum value's name or number")
            }
        case .message(let name):
            return .message(try message(json, ProtoSchema.message(named: name)!, path: path))
        }
    }

    private static func integerText(_ json: JSON) -> String? {
        switch json {
        case .number(let t), .string(let t): return t
        default: return nil
        }
    }

    /// An integer from its decimal text, or from a number written with a
    /// fraction or exponent that is still a whole number ("1e3", "2.0"),
    /// as json_format accepts them.
    private static func int64(_ text: String) -> Int64? {
        if let n = Int64(text) { return n }
        guard text.contains(where: { ".eE".contains($0) }), let d = Double(text), d.rounded() == d,
              abs(d) <= 9_007_199_254_740_992 else { return nil }
        return Int64(d)
    }

    private static func uint64(_ text: String) -> UInt64? {
        if let n = UInt64(text) { return n }
        guard let n = int64(text), n >= 0 else { return nil }
        return UInt64(n)
    }

    // MARK: Envelopes

    /// A Status as JSON: `{"code":"NOT_FOUND","message":"…"}`, the code
    /// named as the StatusCode enum of the .proto names it.
    public static func json(_ status: Status) -> JSON {
        var m = ProtoMessage("groser.v1.Status")
        if status.code != .ok { m.fields[1] = [.enumeration(status.code.rawValue)] }
        if !status.message.isEmpty { m.fields[2] = [.string(status.message)] }
        return json(m)
    }

    /// The body of `body` as JSON: the message of its case of Response's
    /// oneof, written by the encoders groserd answers with and read back
    /// through the descriptors. `{}` for `.none`.
    public static func json(_ body: ResponseBody, emitDefaults: Bool = false) -> JSON {
        let frame = Response(id: 1, body: body).encodedFrame()
        guard let answer = try? ProtoAnswer(Array(frame.dropFirst(4))), let message = answer.body else { return .object([]) }
        return json(message, emitDefaults: emitDefaults)
    }
}

/// Why JSON could not be read as a message: what is wrong, and where (a
/// dotted path of JSON keys, "cart.storeUid" or "records[2].city").
public struct ProtoJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var path: String
    /// The key that names no field, when that is the problem.
    public var unknownField: String?

    public init(_ reason: String, path: String, unknownField: String? = nil) {
        self.reason = reason
        self.path = path
        self.unknownField = unknownField
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
}

/// A Response frame's body read through the descriptors: the envelope's
/// fields and the body message of whichever method answered.
public struct ProtoAnswer: Sendable, Equatable {
    public var id: UInt64
    public var status: Status
    public var continues: Bool
    /// The case of Response's `body` oneof that is set, if one is.
    public var method: MethodField?
    public var body: ProtoMessage?

    /// Reads `bytes` (a frame without its length prefix) as a groser.v1.Response.
    public init(_ bytes: [UInt8]) throws(WireDecodingError) {
        let response = try ProtoMessage.decode(bytes, as: "groser.v1.Response")
        if case .uint(let v)? = response.fields[1]?.first { id = v } else { id = 0 }
        continues = response.fields[3]?.first == .bool(true)
        status = .ok
        if case .message(let s)? = response.fields[2]?.first {
            var code: Int32 = 0
            var message = ""
            if case .enumeration(let c)? = s.fields[1]?.first { code = c }
            if case .string(let m)? = s.fields[2]?.first { message = m }
            status = Status(StatusCode(rawValue: code), message)
        }
        method = nil
        body = nil
        for f in MethodField.allCases {
            if case .message(let m)? = response.fields[f.rawValue]?.first {
                method = f
                body = m
            }
        }
    }
}

extension ProtoMessage {
    /// A Request envelope's encoding around `body`, the request message of
    /// `method`: its id, its deadline, and `body` in the method's oneof case.
    public static func request(id: UInt64, deadlineMilliseconds: UInt32, method: MethodField, body: ProtoMessage) -> [UInt8] {
        var envelope = ProtoMessage("groser.v1.Request")
        if id != 0 { envelope.fields[1] = [.uint(id)] }
        if deadlineMilliseconds != 0 { envelope.fields[2] = [.uint(UInt64(deadlineMilliseconds))] }
        envelope.fields[method.rawValue] = [.message(body)]
        return envelope.encoded()
    }
}

/// Base64 as RFC 4648 writes it, with padding; reading also accepts the
/// URL-safe alphabet and missing padding, as json_format does. With `url`,
/// the URL-safe alphabet without padding (RFC 4648 §5) alone, written and
/// read, as groserd's page tokens are.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` in the standard alphabet, padded; with `url`, URL-safe and unpadded.
    public static func encode(_ bytes: [UInt8], url: Bool = false) -> String {
        let alphabet = url ? urlAlphabet : alphabet
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            var v = UInt32(bytes[i]) << 16
            if n > 1 { v |= UInt32(bytes[i + 1]) << 8 }
            if n > 2 { v |= UInt32(bytes[i + 2]) }
            for k in 0..<4 {
                if k <= n { out.append(alphabet[Int((v >> (18 - 6 * UInt32(k))) & 63)]) } else if !url { out.append(UInt8(ascii: "=")) }
            }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`; nil when it is not base64 (with `url`, when it
    /// is not URL-safe unpadded base64).
    public static func decode(_ text: String, url: Bool = false) -> [UInt8]? {
        var sextets: [UInt8] = []
        var padding = 0
        for b in text.utf8 {
            let v: UInt8
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = b - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = b - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = b - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "_"): v = 63
            case UInt8(ascii: "+") where !url: v = 62
            case UInt8(ascii: "/") where !url: v = 63
            case UInt8(ascii: "=") where !url: padding += 1; continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // nothing after padding
            sextets.append(v)
        }
        guard sextets.count % 4 != 1, padding <= 2 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < sextets.count {
            let n = min(4, sextets.count - i)
            var v: UInt32 = 0
            for k in 0..<4 { v = v << 6 | UInt32(k < n ? sextets[i + k] : 0) }
            out.append(UInt8(truncatingIfNeeded: v >> 16))
            if n > 2 { out.append(UInt8(truncatingIfNeeded: v >> 8)) }
            if n > 3 { out.append(UInt8(truncatingIfNeeded: v)) }
            i += 4
        }
        return out
    }
}
