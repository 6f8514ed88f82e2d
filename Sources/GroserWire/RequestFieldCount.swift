import CGroserProto
import CProtobufC

// How many fields a request's encoding has, counted before protobuf-c unpacks
// it: the limit that keeps a frame of tiny fields from costing protobuf-c
// many times its size, and the allocation-free scan that counts.

extension Request {
    /// The most fields a request may have, counted as `fieldCount` counts
    /// them. A v1 request has at most about 15; the rest is room for fields
    /// a newer client adds. Past it a request is refused unread: protobuf-c's
    /// unpack keeps 32 to 64 bytes of scan state for every field of a message
    /// and 24 bytes plus a malloc'd copy for every unknown one, so a 4 MiB
    /// frame of 2-byte fields cost it over 150 MB. Up to the limit, it costs
    /// at most about 256 × 150 bytes besides copies of the frame's bytes.
    public static let maximumFieldCount = 256
    /// An ImportCatalog request may have one field per this many bytes: it
    /// carries thousands of real fields, one per 6 to 11 bytes, and
    /// protobuf-c's cost for them stays a small multiple of the frame's size.
    /// Every other request keeps `maximumFieldCount`.
    public static let importBytesPerField = 4

    /// The most fields the request in `bytes` may have. Only an operator's
    /// ImportCatalog gets the raised limit (`fromOperator`; groserd refuses
    /// anyone else's before unpacking it): anyone else's request, whatever
    /// it names, keeps `maximumFieldCount`.
    public static func fieldLimit(for bytes: UnsafeRawBufferPointer, fromOperator: Bool = true) -> Int {
        fromOperator && isImport(bytes) ? max(maximumFieldCount, bytes.count / importBytesPerField) : maximumFieldCount
    }

    /// True when the envelope's method is ImportCatalog (field 24): a look
    /// at the top-level keys only, allocating nothing.
    static func isImport(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var scan = WireScan(bytes)
        while let field = scan.next() {
            if field.number == 24 && field.payload != nil { return true }
        }
        return false
    }

    /// The fields in a request's encoding as protobuf-c's unpack would scan
    /// them: the envelope's, and inside every field the schema declares as a
    /// message, that message's, at every depth. Unknown fields, and known
    /// ones given more than once, each count; an unknown field's contents are
    /// not looked into (protobuf-c keeps them as bytes). Counting stops once
    /// past `limit`, and at the first malformed byte (protobuf-c then refuses
    /// the frame itself). Reads the frame once, allocating nothing.
    public static func fieldCount(_ bytes: UnsafeRawBufferPointer, stoppingPast limit: Int = maximumFieldCount) -> Int {
        var count = 0
        countFields(bytes, groser_request_descriptor(), depth: 0, limit: limit, into: &count)
        return count
    }

    private static func countFields(_ bytes: UnsafeRawBufferPointer, _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>,
                                    depth: Int, limit: Int, into count: inout Int) {
        var scan = WireScan(bytes)
        while count <= limit, let field = scan.next() {
            count += 1
            // Request messages do not nest themselves; the depth bound
            // only guards against a schema that one day does.
            guard let payload = field.payload, depth < 32, field.number > 0, field.number <= UInt64(UInt32.max),
                  let declared = protobuf_c_message_descriptor_get_field(descriptor, UInt32(field.number)),
                  declared.pointee.type == PROTOBUF_C_TYPE_MESSAGE,
                  let nested = declared.pointee.descriptor else { continue }
            countFields(payload, nested.assumingMemoryBound(to: ProtobufCMessageDescriptor.self),
                        depth: depth + 1, limit: limit, into: &count)
        }
    }
}

/// The fields of one message's encoding, one at a time, allocating nothing:
/// the number, the wire type and, for length-delimited fields, the bytes.
/// Ends (nil) at the end of the bytes and at the first malformed key, varint
/// or length, where protobuf-c would refuse the frame too.
struct WireScan {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private mutating func varint() -> UInt64? {
        var reader = WireReader(bytes, offset: offset)
        defer { offset = reader.offset }
        return reader.varint()
    }

    /// The next field. A field whose key reads but whose value does not
    /// (or whose wire type is not one protobuf-c reads) is still returned,
    /// as protobuf-c scans it before refusing, and is the last.
    mutating func next() -> (number: UInt64, wireType: UInt64, payload: UnsafeRawBufferPointer?)? {
        guard offset < bytes.count, let key = varint() else { return nil }
        let number = key >> 3, wireType = key & 7
        switch wireType {
        case 0:
            if varint() == nil { offset = bytes.count }
        case 1: offset += 8
        case 5: offset += 4
        case 2:
            guard let length = varint(), length <= UInt64(bytes.count - offset) else {
                offset = bytes.count
                return (number, wireType, nil)
            }
            let start = offset
            offset += Int(length)
            return (number, wireType, UnsafeRawBufferPointer(rebasing: bytes[start..<offset]))
        default:
            offset = bytes.count
        }
        return (number, wireType, nil)
    }
}

