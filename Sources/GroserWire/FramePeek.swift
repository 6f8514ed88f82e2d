// Reading a frame's envelope without decoding its body: the id and status
// of an answer the daemon wrote (for Stats and the request log), the id,
// status and body field of any Response (for the bench), and the method of
// a request groserd refuses unread. All read with the one `WireReader`.

/// What Stats and the request log need from an answer frame the daemon
/// wrote: its id and status code, read from the envelope's first fields
/// without decoding it (the id, `continues`, then the status or the body).
public enum ResponseFramePeek {
    /// The id and status of the last of `frames` (whole frames, back to
    /// back). A CancelWatch writes the watch's last frame (CANCELLED)
    /// before its own answer, and Stats counts that answer.
    public static func lastIDAndStatus(_ frames: UnsafeRawBufferPointer) -> (id: UInt64, status: StatusCode) {
        var rest = frames
        var last = UnsafeRawBufferPointer(rebasing: frames[...])
        while let frame = try? Framing.firstFrame(in: rest, maximumFrameBytes: Int(UInt32.max)), frame.byteCount > 0 {
            last = UnsafeRawBufferPointer(rebasing: rest[..<frame.byteCount])
            rest = UnsafeRawBufferPointer(rebasing: rest[frame.byteCount...])
        }
        return idAndStatus(last)
    }

    public static func idAndStatus(_ frame: UnsafeRawBufferPointer) -> (id: UInt64, status: StatusCode) {
        var reader = WireReader(frame, offset: Framing.headerSize)
        var id: UInt64 = 0
        while !reader.atEnd, let key = reader.varint() {
            switch key {
            case 1 << 3: id = reader.varint() ?? 0  // id
            case 3 << 3: _ = reader.varint()  // continues
            case 2 << 3 | 2:  // status
                guard let length = reader.varint() else { return (id, .unknown) }
                let end = min(frame.count, reader.offset + Int(length))
                while reader.offset < end, let k = reader.varint() {
                    if k == 1 << 3 { return (id, StatusCode(rawValue: Int32(truncatingIfNeeded: reader.varint() ?? 2))) }
                    if k & 7 == 2 { reader.offset += Int(reader.varint() ?? 0) } else { _ = reader.varint() }
                }
                return (id, .ok)
            default:
                return (id, .ok)
            }
        }
        return (id, .ok)
    }
}

/// What a load generator needs from any Response: its id, its status code
/// and which body it carries, read without decoding the body. Unlike
/// `ResponseFramePeek`, which reads frames this build wrote, it reads field
/// by field in any order (and skips fields this build does not know), and
/// refuses malformed bytes.
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
            let wireType = tag & 7
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
            let wireType = tag & 7
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

extension Request {
    /// The method field of the request in `bytes` (a look at the top-level
    /// keys only), or nil when it names none this build knows.
    public static func methodField(of bytes: UnsafeRawBufferPointer) -> MethodField? { envelope(of: bytes).method }

    /// The request's id and method field, as unpacking would read them (the
    /// last of each wins), from a look at the top-level keys only: what
    /// groserd knows of a request it refuses unread. The id is 0 when absent.
    public static func envelope(of bytes: UnsafeRawBufferPointer) -> (id: UInt64, method: MethodField?) {
        var reader = WireReader(bytes)
        var id: UInt64 = 0
        var found: MethodField?
        while !reader.atEnd, let key = reader.varint() {
            switch key & 7 {
            case 0:
                guard let v = reader.varint() else { return (id, found) }
                if key == 1 << 3 { id = v }
            case 1: reader.offset += 8
            case 2:
                guard let n = reader.varint() else { return (id, found) }
                if let m = MethodField(rawValue: UInt32(truncatingIfNeeded: key >> 3)), key >> 3 <= UInt64(UInt32.max) { found = m }
                reader.offset += Int(truncatingIfNeeded: min(n, UInt64(Int.max / 2)))
            case 5: reader.offset += 4
            default: return (id, found)
            }
        }
        return (id, found)
    }
}
