import CGroserProto
import CProtobufC

// The envelopes (Request and Response) through protobuf-c: reading a frame
// (with the field count checked first), and a watch's frames, the one answer
// written by hand.
// The dispatch from a method's field to its conversion is generated
// (Generated/Methods.swift).

extension Request {
    /// Reads a Request from a frame's body. A request of more than
    /// `fieldLimit(for:fromOperator:)` fields is refused before protobuf-c sees it.
    public static func decode(_ bytes: UnsafeRawBufferPointer, fromOperator: Bool = true) throws(WireDecodingError) -> Request {
        // Every field takes at least 2 bytes (a key and a value or length),
        // so a frame this short cannot have too many: no scan.
        let limit = fieldLimit(for: bytes, fromOperator: fromOperator)
        guard bytes.count <= 2 * limit || fieldCount(bytes, stoppingPast: limit) <= limit else {
            throw WireDecodingError("the request has more than \(limit) fields", tooManyFields: true)
        }
        guard let p = groser__v1__request__unpack(nil, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)) else {
            throw WireDecodingError("the frame is not a valid groser.v1.Request message")
        }
        defer { groser__v1__request__free_unpacked(p, nil) }
        let c = p.pointee
        return Request(id: c.id, deadlineMilliseconds: c.deadline_ms, method: decodeMethod(c))
    }

    /// Reads a Request from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Request {
        try withContiguousBytes(bytes) { (raw) throws(WireDecodingError) in try decode(raw) }
    }
}

extension Response {
    /// Reads a Response from a frame's body.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(WireDecodingError) -> Response {
        guard let p = groser__v1__response__unpack(nil, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)) else {
            throw WireDecodingError("the frame is not a valid groser.v1.Response message")
        }
        defer { groser__v1__response__free_unpacked(p, nil) }
        let c = p.pointee
        var status = Status.ok
        if let s = c.status?.pointee {
            status = Status(StatusCode(rawValue: Int32(bitPattern: s.code.rawValue)), str(s.message))
        }
        return Response(id: c.id, status: status, body: decodeBody(c), continues: c.continues != 0)
    }

    /// Reads a Response from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Response {
        try withContiguousBytes(bytes) { (raw) throws(WireDecodingError) in try decode(raw) }
    }

    /// The frames the generated `encodedFrame()` leaves to hand: a watch's,
    /// which carry `continues`.
    func appendHandWritten(to out: inout [UInt8]) {
        guard case .watch(let v) = body else { preconditionFailure("\(body) is written by the generated encodedFrame()") }
        BodyEncoder.watchEvent(v).withUnsafeBytes { body in
            ResponseFrameWriter.appendStreamFrame(id: id, field: .watch, body: body, continues: continues, to: &out)
        }
    }
}

/// `body` with `bytes` as one contiguous buffer (copied only when they are not).
private func withContiguousBytes<T>(_ bytes: some Collection<UInt8>,
                                    _ body: (UnsafeRawBufferPointer) throws(WireDecodingError) -> T) throws(WireDecodingError) -> T {
    let result = bytes.withContiguousStorageIfAvailable { raw in
        Result { () throws(WireDecodingError) -> T in try body(UnsafeRawBufferPointer(raw)) }
    } ?? Array(bytes).withUnsafeBytes { raw in
        Result { () throws(WireDecodingError) -> T in try body(raw) }
    }
    return try result.get()
}
