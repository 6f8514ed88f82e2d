/// The few Protobuf encoding primitives the envelope needs. Bodies are
/// encoded by protobuf-c; the envelope around them is written here so a body
/// encoded once can be spliced into every response without a copy through C
/// (Protobuf allows an embedded message to be written as raw length-delimited
/// bytes, and readers cannot tell the difference).
public enum ProtoWriter {
    public static let wireVarint: UInt32 = 0
    public static let wireLengthDelimited: UInt32 = 2

    /// Seven bits a byte, counted without a loop.
    @inlinable
    public static func varintSize(_ value: UInt64) -> Int { (64 &- (value | 1).leadingZeroBitCount &+ 6) / 7 }

    /// Appends a varint with one append: byte by byte, each append checks
    /// capacity and uniqueness, which showed in the profile.
    @inlinable
    public static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        if value < 0x80 {
            out.append(UInt8(truncatingIfNeeded: value))
            return
        }
        var scratch: (UInt64, UInt64) = (0, 0)
        let n = withUnsafeMutableBytes(of: &scratch) { putVarint(value, into: $0.baseAddress!, at: 0) }
        withUnsafeBytes(of: &scratch) { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    /// Writes a varint at `offset` (room for 10 bytes needed); returns the offset after it.
    @inlinable
    public static func putVarint(_ value: UInt64, into buffer: UnsafeMutableRawPointer, at offset: Int) -> Int {
        var v = value
        var i = offset
        while v >= 0x80 {
            buffer.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: i, as: UInt8.self)
            v >>= 7
            i += 1
        }
        buffer.storeBytes(of: UInt8(truncatingIfNeeded: v), toByteOffset: i, as: UInt8.self)
        return i + 1
    }

    @inlinable
    public static func appendTag(field: UInt32, wireType: UInt32, to out: inout [UInt8]) {
        appendVarint(UInt64(field << 3 | wireType), to: &out)
    }

    @inlinable
    public static func tagSize(field: UInt32) -> Int { varintSize(UInt64(field << 3)) }

    /// The size of a varint field (tag and value); 0 for a value of 0, which
    /// proto3 does not write.
    @inlinable
    public static func varintFieldSize(_ field: UInt32, _ value: UInt64) -> Int {
        value == 0 ? 0 : tagSize(field: field) + varintSize(value)
    }

    /// Appends a varint field, or nothing for 0.
    @inlinable
    public static func appendVarintField(_ field: UInt32, _ value: UInt64, to out: inout [UInt8]) {
        guard value != 0 else { return }
        appendTag(field: field, wireType: wireVarint, to: &out)
        appendVarint(value, to: &out)
    }

    /// The size of a length-delimited field of `length` bytes.
    @inlinable
    public static func lengthDelimitedFieldSize(_ field: UInt32, _ length: Int) -> Int {
        tagSize(field: field) + varintSize(UInt64(length)) + length
    }

    /// Appends a length-delimited field's tag and length; the caller appends the bytes.
    @inlinable
    public static func appendLengthDelimitedHeader(_ field: UInt32, _ length: Int, to out: inout [UInt8]) {
        appendTag(field: field, wireType: wireLengthDelimited, to: &out)
        appendVarint(UInt64(length), to: &out)
    }
}

/// Writes whole Response frames (length prefix included) into a buffer.
public enum ResponseFrameWriter {
    @usableFromInline static let idField: UInt32 = 1
    private static let statusField: UInt32 = 2
    private static let continuesField: UInt32 = 3
    private static let statusCodeField: UInt32 = 1
    private static let statusMessageField: UInt32 = 2

    /// Appends an OK response whose body is already encoded: everything up
    /// to the body is written into a small stack buffer and appended once,
    /// then the body is appended with one copy.
    @inlinable
    public static func appendOK(id: UInt64, field: MethodField, body: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        appendOK(id: id, field: field, body: body, suffix: UnsafeRawBufferPointer(start: nil, count: 0), to: &out)
    }

    /// Appends an OK response whose body is `body` followed by one more
    /// varint field: Protobuf merges concatenated encodings, so a value that
    /// changes per request (ServerInfo's uptime) can follow a body encoded once.
    @inlinable
    public static func appendOK(id: UInt64, field: MethodField, body: UnsafeRawBufferPointer,
                                appendingVarintField number: UInt32, value: UInt64, to out: inout [UInt8]) {
        var scratch: (UInt64, UInt64) = (0, 0)
        let n = withUnsafeMutableBytes(of: &scratch) { raw -> Int in
            let i = ProtoWriter.putVarint(UInt64(number << 3 | ProtoWriter.wireVarint), into: raw.baseAddress!, at: 0)
            return ProtoWriter.putVarint(value, into: raw.baseAddress!, at: i)
        }
        withUnsafeBytes(of: &scratch) { suffix in
            appendOK(id: id, field: field, body: body, suffix: UnsafeRawBufferPointer(rebasing: suffix[0..<n]), to: &out)
        }
    }

    /// Appends an OK response whose body is `body` followed by two varint
    /// fields (values that change per answer, such as versions); a field of
    /// value 0 is left out, as proto3 writes it.
    @inlinable
    public static func appendOK(id: UInt64, field: MethodField, body: UnsafeRawBufferPointer,
                                appendingVarintFields first: (UInt32, UInt64), _ second: (UInt32, UInt64),
                                to out: inout [UInt8]) {
        var scratch: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let n = withUnsafeMutableBytes(of: &scratch) { raw -> Int in
            var i = 0
            if first.1 != 0 {
                i = ProtoWriter.putVarint(UInt64(first.0 << 3 | ProtoWriter.wireVarint), into: raw.baseAddress!, at: i)
                i = ProtoWriter.putVarint(first.1, into: raw.baseAddress!, at: i)
            }
            if second.1 != 0 {
                i = ProtoWriter.putVarint(UInt64(second.0 << 3 | ProtoWriter.wireVarint), into: raw.baseAddress!, at: i)
                i = ProtoWriter.putVarint(second.1, into: raw.baseAddress!, at: i)
            }
            return i
        }
        withUnsafeBytes(of: &scratch) { suffix in
            appendOK(id: id, field: field, body: body, suffix: UnsafeRawBufferPointer(rebasing: suffix[0..<n]), to: &out)
        }
    }

    @inlinable
    static func appendOK(id: UInt64, field: MethodField, body: UnsafeRawBufferPointer, suffix: UnsafeRawBufferPointer,
                         to out: inout [UInt8]) {
        let bodyCount = body.count + suffix.count
        // At most 4 (length) + 11 (id) + 5 (tag) + 10 (body length) bytes.
        var scratch: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let headerSize = withUnsafeMutableBytes(of: &scratch) { raw -> Int in
            writeOKHeader(id: id, field: field, bodyLength: bodyCount, into: raw.baseAddress!)
        }
        withUnsafeBytes(of: &scratch) { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<headerSize])) }
        out.append(contentsOf: body)
        if !suffix.isEmpty { out.append(contentsOf: suffix) }
    }

    /// Writes everything of an OK response up to its body of `bodyLength`
    /// bytes at `p` (at most 30 bytes); returns how many it wrote.
    @inlinable
    public static func writeOKHeader(id: UInt64, field: MethodField, bodyLength: Int, into p: UnsafeMutableRawPointer) -> Int {
        let idSize = id == 0 ? 0 : 1 + ProtoWriter.varintSize(id)
        let bodySize = ProtoWriter.tagSize(field: field.rawValue) + ProtoWriter.varintSize(UInt64(bodyLength)) + bodyLength
        let length = UInt32(truncatingIfNeeded: idSize + bodySize)
        p.storeBytes(of: length.bigEndian, as: UInt32.self)
        var i = Framing.headerSize
        if id != 0 {
            i = ProtoWriter.putVarint(UInt64(idField << 3 | ProtoWriter.wireVarint), into: p, at: i)
            i = ProtoWriter.putVarint(id, into: p, at: i)
        }
        i = ProtoWriter.putVarint(UInt64(field.rawValue << 3 | ProtoWriter.wireLengthDelimited), into: p, at: i)
        return ProtoWriter.putVarint(UInt64(bodyLength), into: p, at: i)
    }

    /// Appends the start of an OK response whose body of `bodyLength` bytes
    /// the caller appends next, in parts (a body assembled from segments).
    public static func appendOKHeader(id: UInt64, field: MethodField, bodyLength: Int, to out: inout [UInt8]) {
        let idSize = id == 0 ? 0 : 1 + ProtoWriter.varintSize(id)
        let bodySize = ProtoWriter.tagSize(field: field.rawValue) + ProtoWriter.varintSize(UInt64(bodyLength)) + bodyLength
        Framing.appendHeader(length: idSize + bodySize, to: &out)
        if id != 0 {
            ProtoWriter.appendTag(field: idField, wireType: ProtoWriter.wireVarint, to: &out)
            ProtoWriter.appendVarint(id, to: &out)
        }
        ProtoWriter.appendTag(field: field.rawValue, wireType: ProtoWriter.wireLengthDelimited, to: &out)
        ProtoWriter.appendVarint(UInt64(bodyLength), to: &out)
    }

    /// The bytes of an OK response frame whose body is `bodyLength` bytes.
    public static func okFrameSize(id: UInt64, field: MethodField, bodyLength: Int) -> Int {
        let idSize = id == 0 ? 0 : 1 + ProtoWriter.varintSize(id)
        return Framing.headerSize + idSize + ProtoWriter.tagSize(field: field.rawValue)
            + ProtoWriter.varintSize(UInt64(bodyLength)) + bodyLength
    }

    /// Appends an OK response whose body is already encoded.
    public static func appendOK(id: UInt64, field: MethodField, body: [UInt8], to out: inout [UInt8]) {
        body.withUnsafeBytes { appendOK(id: id, field: field, body: $0, to: &out) }
    }

    /// A whole OK response frame in one allocation of its exact size: for
    /// an answer that goes alone (a shard's), where appending to an empty
    /// array allocated twice, for the header and again for the body.
    public static func okFrame(id: UInt64, field: MethodField, body: [UInt8]) -> [UInt8] {
        let size = okFrameSize(id: id, field: field, bodyLength: body.count)
        var frame: [UInt8] = []
        frame.reserveCapacity(size)
        appendOK(id: id, field: field, body: body, to: &frame)
        return frame
    }

    /// Appends one frame of a stream (a watch's): the id, `continues`
    /// (field 3) when more frames follow, then the body followed by one more
    /// varint field when `value` is not 0 (a field that differs per watcher,
    /// after a body encoded once for all of them).
    public static func appendStreamFrame(id: UInt64, field: MethodField, body: UnsafeRawBufferPointer,
                                         appendingVarintField number: UInt32 = 0, value: UInt64 = 0,
                                         continues: Bool, to out: inout [UInt8]) {
        let suffixSize = value == 0 ? 0 : ProtoWriter.tagSize(field: number) + ProtoWriter.varintSize(value)
        let bodyCount = body.count + suffixSize
        let idSize = id == 0 ? 0 : 1 + ProtoWriter.varintSize(id)
        let continuesSize = continues ? 2 : 0
        let bodySize = ProtoWriter.tagSize(field: field.rawValue) + ProtoWriter.varintSize(UInt64(bodyCount)) + bodyCount
        Framing.appendHeader(length: idSize + continuesSize + bodySize, to: &out)
        if id != 0 {
            ProtoWriter.appendTag(field: idField, wireType: ProtoWriter.wireVarint, to: &out)
            ProtoWriter.appendVarint(id, to: &out)
        }
        if continues {
            ProtoWriter.appendTag(field: continuesField, wireType: ProtoWriter.wireVarint, to: &out)
            out.append(1)
        }
        ProtoWriter.appendTag(field: field.rawValue, wireType: ProtoWriter.wireLengthDelimited, to: &out)
        ProtoWriter.appendVarint(UInt64(bodyCount), to: &out)
        out.append(contentsOf: body)
        if value != 0 {
            ProtoWriter.appendTag(field: number, wireType: ProtoWriter.wireVarint, to: &out)
            ProtoWriter.appendVarint(value, to: &out)
        }
    }

    /// Appends a response that carries only a status (an error).
    public static func appendStatus(id: UInt64, status: Status, to out: inout [UInt8]) {
        let message = Array(status.message.utf8)
        let code = UInt64(UInt32(bitPattern: status.code.rawValue))
        var statusSize = 0
        if code != 0 { statusSize += 1 + ProtoWriter.varintSize(code) }
        if !message.isEmpty { statusSize += 1 + ProtoWriter.varintSize(UInt64(message.count)) + message.count }
        let idSize = id == 0 ? 0 : 1 + ProtoWriter.varintSize(id)
        let total = idSize + 1 + ProtoWriter.varintSize(UInt64(statusSize)) + statusSize
        Framing.appendHeader(length: total, to: &out)
        if id != 0 {
            ProtoWriter.appendTag(field: idField, wireType: ProtoWriter.wireVarint, to: &out)
            ProtoWriter.appendVarint(id, to: &out)
        }
        ProtoWriter.appendTag(field: statusField, wireType: ProtoWriter.wireLengthDelimited, to: &out)
        ProtoWriter.appendVarint(UInt64(statusSize), to: &out)
        if code != 0 {
            ProtoWriter.appendTag(field: statusCodeField, wireType: ProtoWriter.wireVarint, to: &out)
            ProtoWriter.appendVarint(code, to: &out)
        }
        if !message.isEmpty {
            ProtoWriter.appendTag(field: statusMessageField, wireType: ProtoWriter.wireLengthDelimited, to: &out)
            ProtoWriter.appendVarint(UInt64(message.count), to: &out)
            out.append(contentsOf: message)
        }
    }
}
