/// What the load generator needs from a Response: its id, its status code
/// and which body it carries, read without decoding the body. Parsed by the
/// Protobuf wire format field by field, so any field order (and fields this
/// build does not know) read correctly; bodies are skipped by their length.
public struct ResponseEnvelope: Sendable, Equatable {
    /// `Response.id` (field 1); 0 when absent.
    public var id: UInt64 = 0
    /// `Response.status.code` (field 2, its field 1); 0 (OK) when absent.
    public var statusCode: Int32 = 0
    /// The field number of the `body` oneof case present; 0 when none.
    public var bodyField: UInt32 = 0
    /// The body's length in bytes (its embedded message, without tag and length).
    public var bodyBytes: Int = 0

    public init(id: UInt64 = 0, statusCode: Int32 = 0, bodyField: UInt32 = 0, bodyBytes: Int = 0) {
        self.id = id
        self.statusCode = statusCode
        self.bodyField = bodyField
        self.bodyBytes = bodyBytes
    }

    private static let idField: UInt32 = 1
    private static let statusField: UInt32 = 2
    private static let statusCodeField: UInt32 = 1
    /// `Response.body` cases are fields 10 and up.
    private static let firstBodyField: UInt32 = 10

    /// Reads a Response frame's body (without the length prefix); nil when
    /// the bytes are not a well-formed Protobuf message.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> ResponseEnvelope? {
        var reader = WireReader(bytes)
        var envelope = ResponseEnvelope()
        while !reader.atEnd {
            guard let tag = reader.varint() else { return nil }
            let field = UInt32(truncatingIfNeeded: tag >> 3)
            let wireType = UInt32(truncatingIfNeeded: tag & 7)
            switch (field, wireType) {
            case (idField, 0):
                guard let id = reader.varint() else { return nil }
                envelope.id = id
            case (statusField, 2):
                guard let status = reader.lengthDelimited() else { return nil }
                // A repeated embedded message merges: the last code wins.
                guard let code = statusCode(status, default: envelope.statusCode) else { return nil }
                envelope.statusCode = code
            case (let f, 2) where f >= firstBodyField:
                guard let body = reader.lengthDelimited() else { return nil }
                envelope.bodyField = f
                envelope.bodyBytes = body.count
            default:
                guard field != 0, reader.skip(wireType: wireType) else { return nil }
            }
        }
        return envelope
    }

    private static func statusCode(_ bytes: UnsafeRawBufferPointer, default code: Int32) -> Int32? {
        var reader = WireReader(bytes)
        var code = code
        while !reader.atEnd {
            guard let tag = reader.varint() else { return nil }
            let field = UInt32(truncatingIfNeeded: tag >> 3)
            let wireType = UInt32(truncatingIfNeeded: tag & 7)
            if field == statusCodeField && wireType == 0 {
                guard let v = reader.varint() else { return nil }
                // An enum is an int32 written as a (sign-extended) varint.
                code = Int32(truncatingIfNeeded: v)
            } else {
                guard field != 0, reader.skip(wireType: wireType) else { return nil }
            }
        }
        return code
    }
}

/// Reads Protobuf wire-format values from a buffer; every method answers nil
/// (or false) on truncated or malformed input instead of reading past the end.
struct WireReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset >= bytes.count }

    @inline(__always)
    mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count && shift < 64 {
            let b = bytes[offset]
            offset += 1
            result |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    mutating func lengthDelimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    mutating func skip(wireType: UInt32) -> Bool {
        switch wireType {
        case 0: return varint() != nil
        case 1: return advance(8)
        case 2: return lengthDelimited() != nil
        case 5: return advance(4)
        default: return false  // groups (3, 4) are not used by proto3
        }
    }

    private mutating func advance(_ n: Int) -> Bool {
        guard bytes.count - offset >= n else { return false }
        offset += n
        return true
    }
}
