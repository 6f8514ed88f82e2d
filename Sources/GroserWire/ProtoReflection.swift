import CGroserProto
import CProtobufC
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Reflection over the protobuf-c descriptors compiled into CGroserProto: the
// schema of every message reachable from Request and Response as Swift
// values, any message's encoding read into a `ProtoMessage` tree (through
// protobuf-c's own unpack, so it accepts exactly what groserd accepts), and
// such a tree written back as Protobuf wire bytes. The descriptors are
// static const data, so pointers to them stay valid for the whole process;
// the unpacked C structs are copied out and freed in the same scope, and no
// pointer leaves this file.

/// A field's Protobuf type, as `.proto` files spell it; messages and enums
/// by their full names ("groser.v1.Money").
public enum ProtoFieldType: Sendable, Hashable {
    case double, float, int32, int64, uint32, uint64, sint32, sint64
    case fixed32, fixed64, sfixed32, sfixed64, bool, string, bytes
    case enumeration(String)
    case message(String)

    /// The name a `.proto` file gives the type.
    public var protoName: String {
        switch self {
        case .enumeration(let name), .message(let name): return name
        default: return "\(self)"
        }
    }

    /// 64-bit integers, which Protobuf's JSON mapping writes as strings
    /// (a JavaScript number cannot hold every one).
    public var isJSON64Bit: Bool {
        switch self {
        case .int64, .uint64, .sint64, .fixed64, .sfixed64: return true
        default: return false
        }
    }
}

/// One field of a message, as the descriptor compiled in declares it.
public struct ProtoFieldInfo: Sendable, Hashable {
    /// The name in the `.proto` file: "store_uid".
    public let name: String
    /// Its JSON name, lowerCamelCase as protoc derives it: "storeUid".
    public let jsonName: String
    public let number: UInt32
    public let type: ProtoFieldType
    public let isRepeated: Bool
    /// The fields of one oneof share this index (0, 1, ... in the order
    /// the message's oneofs first appear); nil outside a oneof. protobuf-c's
    /// descriptors keep no oneof names, only which fields share one.
    public let oneofIndex: Int?
    /// Set or not apart from its value: a message field, a oneof member, a
    /// proto2 optional. Proto3 scalars without presence are "set" only when
    /// not their default, and the JSON mapping leaves defaults out.
    public let hasPresence: Bool
}

/// A message type: its full name and its fields in declaration order.
public struct ProtoMessageInfo: Sendable, Hashable {
    /// "groser.v1.GetStoreRequest"
    public let fullName: String
    public let fields: [ProtoFieldInfo]

    /// The field numbered `number`, if any.
    public func field(number: UInt32) -> ProtoFieldInfo? { fields.first { $0.number == number } }

    /// The field named `name` by its JSON name or by its `.proto` name, as
    /// the JSON mapping accepts either.
    public func field(named name: String) -> ProtoFieldInfo? {
        fields.first { $0.jsonName == name } ?? fields.first { $0.name == name }
    }

    /// "GetStoreRequest"
    public var shortName: String { String(fullName.split(separator: ".").last ?? Substring(fullName)) }
}

/// An enum type and its values in declaration order.
public struct ProtoEnumInfo: Sendable, Hashable {
    public let fullName: String
    public let values: [(name: String, number: Int32)]

    /// The name of `number`, or nil for a number the enum does not declare.
    public func name(of number: Int32) -> String? { values.first { $0.number == number }?.name }

    public static func == (a: ProtoEnumInfo, b: ProtoEnumInfo) -> Bool {
        a.fullName == b.fullName && a.values.elementsEqual(b.values) { $0 == $1 }
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(fullName) }
}

/// One value of a field: a scalar, an enum's number, or a nested message.
/// Signed integers of every width are `int`, unsigned ones `uint`, float
/// and double `double`; the field's `ProtoFieldType` says which it was.
public indirect enum ProtoValue: Sendable, Hashable {
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case bool(Bool)
    case string(String)
    case bytes([UInt8])
    case enumeration(Int32)
    case message(ProtoMessage)

    /// True for the value a proto3 field without presence is not sent with.
    public var isDefault: Bool {
        switch self {
        case .int(let v): return v == 0
        case .uint(let v): return v == 0
        case .double(let v): return v == 0 && v.sign == .plus
        case .bool(let v): return !v
        case .string(let v): return v.isEmpty
        case .bytes(let v): return v.isEmpty
        case .enumeration(let v): return v == 0
        case .message: return false
        }
    }
}

/// A message read from its encoding (or from JSON): its type's full name and
/// the fields that are set, by number. A repeated field holds its values in
/// order; every other field holds one. Proto3 scalars without presence are
/// kept only when they are not their default, as the wire format does.
public struct ProtoMessage: Sendable, Hashable {
    public let typeName: String
    public var fields: [UInt32: [ProtoValue]]

    /// An empty message of the type `typeName` (a full name).
    public init(_ typeName: String, fields: [UInt32: [ProtoValue]] = [:]) {
        self.typeName = typeName
        self.fields = fields
    }

    /// The schema of this message's type.
    public var info: ProtoMessageInfo { ProtoSchema.message(named: typeName)! }

    /// The first value of the field named `name` (JSON or `.proto` name), or nil when unset.
    public subscript(_ name: String) -> ProtoValue? {
        guard let f = info.field(named: name) else { return nil }
        return fields[f.number]?.first
    }
}

/// The schema compiled in: every message and enum reachable from the
/// envelopes Request and Response, read once from protobuf-c's descriptors.
public enum ProtoSchema {
    /// Every message type, in the order first reached from Request then Response.
    public static var messages: [ProtoMessageInfo] { registry.order.map { registry.messages[$0]!.info } }

    /// The message named `name`: its full name ("groser.v1.City") or, when
    /// only one message has it, its short name ("City").
    public static func message(named name: String) -> ProtoMessageInfo? {
        descriptorEntry(named: name)?.info
    }

    /// The enum named by its full name ("groser.v1.StatusCode").
    public static func enumeration(named name: String) -> ProtoEnumInfo? { registry.enums[name] }

    /// The request message of `method` (the type of its field in Request's oneof).
    public static func requestMessage(for method: MethodField) -> ProtoMessageInfo {
        envelopeField("groser.v1.Request", method)
    }

    /// The response message of `method` (the type of its field in Response's oneof).
    public static func responseMessage(for method: MethodField) -> ProtoMessageInfo {
        envelopeField("groser.v1.Response", method)
    }

    private static func envelopeField(_ envelope: String, _ method: MethodField) -> ProtoMessageInfo {
        guard let f = registry.messages[envelope]!.info.field(number: method.rawValue),
              case .message(let name) = f.type else {
            fatalError("\(envelope) has no message field \(method.rawValue): the method table and the .proto files disagree")
        }
        return registry.messages[name]!.info
    }

    static func descriptorEntry(named name: String) -> MessageEntry? {
        if let e = registry.messages[name] { return e }
        let matches = registry.messages.values.filter { $0.info.shortName == name }
        return matches.count == 1 ? matches[0] : nil
    }

    struct MessageEntry {
        let info: ProtoMessageInfo
        let descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    }

    /// The descriptors' Swift form, keyed by full name.
    struct Registry: @unchecked Sendable {
        // @unchecked: the only pointers are to protobuf-c descriptors, which
        // are const static data of CGroserProto, never written or freed.
        var messages: [String: MessageEntry] = [:]
        var enums: [String: ProtoEnumInfo] = [:]
        var order: [String] = []

        mutating func add(_ d: UnsafePointer<ProtobufCMessageDescriptor>) {
            let fullName = String(cString: d.pointee.name)
            guard messages[fullName] == nil else { return }
            // Registered before its fields, so a message that contains
            // itself (none does yet) would not recurse forever.
            messages[fullName] = MessageEntry(info: ProtoMessageInfo(fullName: fullName, fields: []), descriptor: d)
            order.append(fullName)
            var fields: [ProtoFieldInfo] = []
            var oneofOffsets: [UInt32] = []
            for i in 0..<Int(d.pointee.n_fields) {
                let f = d.pointee.fields[i]
                let type: ProtoFieldType
                switch f.type {
                case PROTOBUF_C_TYPE_INT32: type = .int32
                case PROTOBUF_C_TYPE_SINT32: type = .sint32
                case PROTOBUF_C_TYPE_SFIXED32: type = .sfixed32
                case PROTOBUF_C_TYPE_INT64: type = .int64
                case PROTOBUF_C_TYPE_SINT64: type = .sint64
                case PROTOBUF_C_TYPE_SFIXED64: type = .sfixed64
                case PROTOBUF_C_TYPE_UINT32: type = .uint32
                case PROTOBUF_C_TYPE_FIXED32: type = .fixed32
                case PROTOBUF_C_TYPE_UINT64: type = .uint64
                case PROTOBUF_C_TYPE_FIXED64: type = .fixed64
                case PROTOBUF_C_TYPE_FLOAT: type = .float
                case PROTOBUF_C_TYPE_DOUBLE: type = .double
                case PROTOBUF_C_TYPE_BOOL: type = .bool
                case PROTOBUF_C_TYPE_STRING: type = .string
                case PROTOBUF_C_TYPE_BYTES: type = .bytes
                case PROTOBUF_C_TYPE_ENUM:
                    let e = f.descriptor.assumingMemoryBound(to: ProtobufCEnumDescriptor.self)
                    let name = String(cString: e.pointee.name)
                    addEnum(e, name)
                    type = .enumeration(name)
                case PROTOBUF_C_TYPE_MESSAGE:
                    let m = f.descriptor.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
                    add(m)
                    type = .message(String(cString: m.pointee.name))
                default:
                    fatalError("protobuf-c field type \(f.type.rawValue) is not one this build knows")
                }
                let isOneof = f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0
                var oneofIndex: Int?
                if isOneof {
                    // Members of one oneof share the offset of its `_case` field.
                    if let at = oneofOffsets.firstIndex(of: f.quantifier_offset) {
                        oneofIndex = at
                    } else {
                        oneofIndex = oneofOffsets.count
                        oneofOffsets.append(f.quantifier_offset)
                    }
                }
                let repeated = f.label == PROTOBUF_C_LABEL_REPEATED
                let name = String(cString: f.name)
                fields.append(ProtoFieldInfo(
                    name: name, jsonName: ProtoSchema.jsonName(name), number: f.id, type: type, isRepeated: repeated,
                    oneofIndex: oneofIndex,
                    hasPresence: !repeated && (isOneof || f.type == PROTOBUF_C_TYPE_MESSAGE || f.label == PROTOBUF_C_LABEL_OPTIONAL)))
            }
            messages[fullName] = MessageEntry(info: ProtoMessageInfo(fullName: fullName, fields: fields), descriptor: d)
        }

        mutating func addEnum(_ e: UnsafePointer<ProtobufCEnumDescriptor>, _ name: String) {
            guard enums[name] == nil else { return }
            var values: [(name: String, number: Int32)] = []
            for i in 0..<Int(e.pointee.n_values) {
                values.append((String(cString: e.pointee.values[i].name), e.pointee.values[i].value))
            }
            enums[name] = ProtoEnumInfo(fullName: name, values: values)
        }
    }

    static let registry: Registry = {
        var r = Registry()
        // The static descriptors' own addresses: the registry keeps them.
        r.add(groser_request_descriptor())
        r.add(groser_response_descriptor())
        return r
    }()

    /// protoc's json_name: each underscore dropped and the letter after it
    /// upper-cased ("store_uid" → "storeUid", "p50_us" → "p50Us").
    public static func jsonName(_ protoName: String) -> String {
        var out = ""
        var upper = false
        for c in protoName {
            if c == "_" {
                upper = true
            } else if upper {
                out += c.uppercased()
                upper = false
            } else {
                out.append(c)
            }
        }
        return out
    }
}

// MARK: - Reading an encoding

extension ProtoMessage {
    /// Reads the encoding `bytes` as the message `typeName` with protobuf-c's
    /// unpack (what groserd itself accepts), copying every set field out.
    public static func decode(_ bytes: [UInt8], as typeName: String) throws(WireDecodingError) -> ProtoMessage {
        guard let entry = ProtoSchema.descriptorEntry(named: typeName) else {
            throw WireDecodingError("no message type \(typeName) is compiled in")
        }
        let unpacked = bytes.withUnsafeBufferPointer { buffer in
            protobuf_c_message_unpack(entry.descriptor, nil, buffer.count, buffer.baseAddress)
        }
        guard let unpacked else { throw WireDecodingError("the bytes are not a valid \(entry.info.fullName) message") }
        defer { protobuf_c_message_free_unpacked(unpacked, nil) }
        return copy(UnsafeRawPointer(unpacked), entry)
    }

    private static func copy(_ base: UnsafeRawPointer, _ entry: ProtoSchema.MessageEntry) -> ProtoMessage {
        var message = ProtoMessage(entry.info.fullName)
        let d = entry.descriptor.pointee
        for i in 0..<Int(d.n_fields) {
            let f = d.fields[i]
            let info = entry.info.fields[i]
            if f.label == PROTOBUF_C_LABEL_REPEATED {
                let count = base.load(fromByteOffset: Int(f.quantifier_offset), as: Int.self)
                guard count > 0, let array = base.load(fromByteOffset: Int(f.offset), as: UnsafeRawPointer?.self) else { continue }
                let stride = elementStride(f.type)
                message.fields[f.id] = (0..<count).compactMap { element(array + $0 * stride, f, info) }
                continue
            }
            if f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0 {
                // The `_case` field holds the number of the member that is set.
                guard base.load(fromByteOffset: Int(f.quantifier_offset), as: UInt32.self) == f.id else { continue }
            } else if f.label == PROTOBUF_C_LABEL_OPTIONAL && f.quantifier_offset != 0 {
                // proto2 optional scalars: a protobuf_c_boolean has_ field.
                guard base.load(fromByteOffset: Int(f.quantifier_offset), as: Int32.self) != 0 else { continue }
            }
            guard let value = element(base + Int(f.offset), f, info) else { continue }
            if !info.hasPresence && value.isDefault { continue }
            message.fields[f.id] = [value]
        }
        return message
    }

    /// How far apart a repeated field's elements are in protobuf-c's array.
    private static func elementStride(_ type: ProtobufCType) -> Int {
        switch type {
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64,
             PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_DOUBLE: return 8
        case PROTOBUF_C_TYPE_STRING, PROTOBUF_C_TYPE_MESSAGE: return MemoryLayout<UnsafeRawPointer>.stride
        case PROTOBUF_C_TYPE_BYTES: return MemoryLayout<ProtobufCBinaryData>.stride
        default: return 4  // 32-bit integers, float, enums, protobuf_c_boolean (an int)
        }
    }

    /// The value stored at `p` as protobuf-c lays out a field of `f`'s type;
    /// nil for an absent message (a null pointer).
    private static func element(_ p: UnsafeRawPointer, _ f: ProtobufCFieldDescriptor, _ info: ProtoFieldInfo) -> ProtoValue? {
        switch f.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SFIXED32: return .int(Int64(p.load(as: Int32.self)))
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64: return .int(p.load(as: Int64.self))
        case PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_FIXED32: return .uint(UInt64(p.load(as: UInt32.self)))
        case PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64: return .uint(p.load(as: UInt64.self))
        case PROTOBUF_C_TYPE_FLOAT: return .double(Double(p.load(as: Float.self)))
        case PROTOBUF_C_TYPE_DOUBLE: return .double(p.load(as: Double.self))
        case PROTOBUF_C_TYPE_BOOL: return .bool(p.load(as: Int32.self) != 0)
        case PROTOBUF_C_TYPE_ENUM: return .enumeration(p.load(as: Int32.self))
        case PROTOBUF_C_TYPE_STRING:
            // protobuf-c keeps strings NUL-terminated: one with a NUL byte
            // inside reads as far as the NUL (a limit of protobuf-c's API).
            guard let s = p.load(as: UnsafePointer<CChar>?.self) else { return .string("") }
            return .string(String(decoding: UnsafeRawBufferPointer(start: s, count: strlen(s)), as: UTF8.self))
        case PROTOBUF_C_TYPE_BYTES:
            let b = p.load(as: ProtobufCBinaryData.self)
            guard b.len > 0, let data = b.data else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: data, count: b.len)))
        case PROTOBUF_C_TYPE_MESSAGE:
            guard let nested = p.load(as: UnsafeRawPointer?.self), case .message(let name) = info.type,
                  let entry = ProtoSchema.registry.messages[name] else { return nil }
            return .message(copy(nested, entry))
        default:
            return nil
        }
    }
}

// MARK: - Writing an encoding

extension ProtoMessage {
    /// The message's Protobuf encoding, fields in number order, repeated
    /// numbers packed (proto3's default). Written directly rather than
    /// through protobuf-c's pack, which would need C structs built field by
    /// field at the descriptors' offsets: the wire format is the simpler
    /// contract, and every encoding is read back by protobuf-c in the tests.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        append(to: &out)
        return out
    }

    private func append(to out: inout [UInt8]) {
        for f in info.fields.sorted(by: { $0.number < $1.number }) {
            guard let values = fields[f.number], !values.isEmpty else { continue }
            if f.isRepeated, let wire = Self.packedWireType(f.type) {
                var packed: [UInt8] = []
                for v in values { Self.appendScalar(v, f.type, wire, to: &packed) }
                ProtoWriter.appendLengthDelimitedHeader(f.number, packed.count, to: &out)
                out += packed
                continue
            }
            for v in values {
                switch v {
                case .string(let s):
                    ProtoWriter.appendLengthDelimitedHeader(f.number, s.utf8.count, to: &out)
                    out += s.utf8
                case .bytes(let b):
                    ProtoWriter.appendLengthDelimitedHeader(f.number, b.count, to: &out)
                    out += b
                case .message(let m):
                    let nested = m.encoded()
                    ProtoWriter.appendLengthDelimitedHeader(f.number, nested.count, to: &out)
                    out += nested
                default:
                    let wire = Self.packedWireType(f.type) ?? 0
                    ProtoWriter.appendTag(field: f.number, wireType: wire, to: &out)
                    Self.appendScalar(v, f.type, wire, to: &out)
                }
            }
        }
    }

    /// The wire type of a numeric field (0 varint, 1 64-bit, 5 32-bit);
    /// nil for strings, bytes and messages, which cannot be packed.
    private static func packedWireType(_ type: ProtoFieldType) -> UInt32? {
        switch type {
        case .fixed64, .sfixed64, .double: return 1
        case .fixed32, .sfixed32, .float: return 5
        case .string, .bytes, .message: return nil
        default: return 0
        }
    }

    private static func appendScalar(_ v: ProtoValue, _ type: ProtoFieldType, _ wire: UInt32, to out: inout [UInt8]) {
        let bits: UInt64
        switch (v, type) {
        case (.int(let n), .sint32), (.int(let n), .sint64): bits = UInt64(bitPattern: (n << 1) ^ (n >> 63))
        case (.int(let n), _): bits = UInt64(bitPattern: n)  // int32 negatives take 10 bytes, as protobuf sign-extends them
        case (.uint(let n), _): bits = n
        case (.bool(let b), _): bits = b ? 1 : 0
        case (.enumeration(let n), _): bits = UInt64(bitPattern: Int64(n))
        case (.double(let d), .float): bits = UInt64(Float(d).bitPattern)
        case (.double(let d), _): bits = d.bitPattern
        default: bits = 0
        }
        switch wire {
        case 1: for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
        case 5: for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
        default: ProtoWriter.appendVarint(bits, to: &out)
        }
    }
}
