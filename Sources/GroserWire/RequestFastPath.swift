/// A reader for the requests clients send most (ServerInfo, ListCities,
/// GetStore, GetShelf with plain fields), straight from the frame with no
/// allocation: protobuf-c's unpack mallocs every message and string and
/// costs more than answering from the encoded catalog. It answers nil for
/// anything it is not sure of (another method, an unknown or repeated
/// field, a string with a NUL, a malformed byte), and the caller then uses
/// `Request.decode`, so the two never disagree on a request it reads
/// (tests compare them on random input).
extension Request {
    // Tags (field number << 3 | wire type) of the fields read here.
    private static let idTag: UInt64 = 1 << 3 | 0
    private static let deadlineTag: UInt64 = 2 << 3 | 0
    private static let serverInfoTag: UInt64 = 10 << 3 | 2
    private static let listCitiesTag: UInt64 = 11 << 3 | 2
    private static let getStoreTag: UInt64 = 12 << 3 | 2
    private static let getShelfTag: UInt64 = 13 << 3 | 2

    /// The request in `bytes` (a frame's body), or nil: then use `decode`.
    public static func decodeCommonMethod(_ bytes: UnsafeRawBufferPointer) -> Request? {
        var reader = FastWireReader(bytes)
        var id: UInt64 = 0
        var deadline: UInt32 = 0
        var method: RequestMethod?
        var seenID = false, seenDeadline = false
        while !reader.atEnd {
            // Every tag read here is one byte; a longer one is another field.
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case idTag:
                guard !seenID, let v = reader.varint(maxBytes: 9) else { return nil }
                id = v
                seenID = true
            case deadlineTag:
                guard !seenDeadline, let v = reader.varint(maxBytes: 5) else { return nil }
                deadline = UInt32(truncatingIfNeeded: v)
                seenDeadline = true
            case serverInfoTag, listCitiesTag:
                guard method == nil, let body = reader.lengthDelimited(), body.isEmpty else { return nil }
                method = tag == serverInfoTag ? .serverInfo : .listCities
            case getStoreTag:
                guard method == nil, let body = reader.lengthDelimited(), let m = getStore(body) else { return nil }
                method = m
            case getShelfTag:
                guard method == nil, let body = reader.lengthDelimited(), let m = getShelf(body) else { return nil }
                method = m
            default:
                return nil
            }
        }
        guard let method else { return nil }
        return Request(id: id, deadlineMilliseconds: deadline, method: method)
    }

    private static func getStore(_ bytes: UnsafeRawBufferPointer) -> RequestMethod? {
        var reader = FastWireReader(bytes)
        var selector: StoreSelector?
        var includeProducts = false
        var seenProducts = false
        var known: UInt64 = 0
        var seenKnown = false
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2, 2 << 3 | 2, 3 << 3 | 2:
                // A second selector, even the same field again, is left to protobuf-c.
                guard selector == nil, let text = reader.string() else { return nil }
                selector = tag == 1 << 3 | 2 ? .cityCode(text) : tag == 2 << 3 | 2 ? .cityUID(text) : .storeUID(text)
            case 4 << 3 | 0:
                guard !seenProducts, let v = reader.varint(maxBytes: 1) else { return nil }
                includeProducts = v != 0
                seenProducts = true
            case 5 << 3 | 0:
                guard !seenKnown, let v = reader.varint(maxBytes: 10) else { return nil }
                known = v
                seenKnown = true
            default:
                return nil
            }
        }
        return .getStore(selector: selector, includeProducts: includeProducts, knownStoreVersion: known)
    }

    private static func getShelf(_ bytes: UnsafeRawBufferPointer) -> RequestMethod? {
        var reader = FastWireReader(bytes)
        var uid = ""
        var seen = false
        var known: UInt64 = 0
        var seenKnown = false
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2:
                guard !seen, let text = reader.string() else { return nil }
                uid = text
                seen = true
            case 2 << 3 | 0:
                guard !seenKnown, let v = reader.varint(maxBytes: 10) else { return nil }
                known = v
                seenKnown = true
            default:
                return nil
            }
        }
        return .getShelf(shelfUID: uid, knownStoreVersion: known)
    }
}

/// Protobuf wire values from a buffer, refusing (nil) anything unusual
/// rather than reading past the end.
private struct FastWireReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset >= bytes.count }

    /// A varint of at most `maxBytes` bytes.
    @inline(__always)
    mutating func varint(maxBytes: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        let end = min(bytes.count, offset + maxBytes)
        while offset < end {
            let b = bytes[offset]
            offset += 1
            result |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    mutating func lengthDelimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(maxBytes: 3), length <= UInt64(bytes.count - offset) else { return nil }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    /// A string field's text; nil when it holds a NUL, which the C strings
    /// of protobuf-c would cut short.
    mutating func string() -> String? {
        guard let raw = lengthDelimited(), !raw.contains(0) else { return nil }
        return String(decoding: raw, as: UTF8.self)
    }
}
