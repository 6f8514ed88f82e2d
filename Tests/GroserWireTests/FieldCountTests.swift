import GroserWire
import Testing

/// `Request.fieldCount` and the limit `Request.decode` applies before
/// protobuf-c sees a frame: unknown and repeated fields cost protobuf-c's
/// unpack 50 to 100 times their size.
@Suite("request field limit")
struct FieldCountTests {
    private func count(_ bytes: [UInt8], stoppingPast limit: Int = Request.maximumFieldCount) -> Int {
        bytes.withUnsafeBytes { Request.fieldCount($0, stoppingPast: limit) }
    }

    /// id 7, then `n` copies of field 3 (not in the schema), varint 0.
    private func unknownFields(_ n: Int) -> [UInt8] {
        [0x08, 0x07] + [UInt8](repeating: 0, count: 2 * n).enumerated().map { $0.offset % 2 == 0 ? 0x18 : 0x00 }
    }

    @Test(arguments: [
        Labeled("empty", ([] as [UInt8], 0)),
        Labeled("ServerInfo with an id", ([0x08, 0x01, 0x52, 0x00], 2)),
        // get_store {city_code "SPB", include_products true}: envelope 2, inside 2.
        Labeled("GetStore", ([0x08, 0x02, 0x62, 0x07, 0x0A, 0x03, 0x53, 0x50, 0x42, 0x20, 0x01], 4)),
        // get_store with include_products given three times: each occurrence counts.
        Labeled("a known field repeated", ([0x62, 0x06, 0x20, 0x01, 0x20, 0x00, 0x20, 0x01], 4)),
        // field 9 (unknown), length-delimited, holding 3 fields: counted once, not looked into.
        Labeled("an unknown field's contents", ([0x08, 0x01, 0x4A, 0x06, 0x08, 0x01, 0x08, 0x01, 0x08, 0x01], 2)),
        // fixed64 and fixed32 unknown fields.
        Labeled("fixed-width unknown fields", ([0x19] + [UInt8](repeating: 0, count: 8) + [0x1D, 0, 0, 0, 0], 2)),
        // A truncated varint ends the count at the field it began.
        Labeled("malformed", ([0x08, 0x01, 0x18, 0xFF], 2)),
    ])
    func fieldsAreCountedAsProtobufCScansThem(_ c: Labeled<([UInt8], Int)>) {
        #expect(count(c.value.0) == c.value.1)
    }

    @Test func fieldsInsideNestedKnownMessagesCount() {
        // add_item (16) { mutation (1) { session (1) "s" } , 300 × unknown field 9 varint }.
        let mutation: [UInt8] = [0x0A, 0x03, 0x0A, 0x01, 0x73]
        var inner = mutation
        for _ in 0..<300 { inner += [0x48, 0x01] }
        let frame: [UInt8] = [0x08, 0x01, 0x82, 0x01] + varint(inner.count) + inner
        #expect(count(frame, stoppingPast: 10_000) == 1 + 1 + 1 + 1 + 300)
        #expect(throws: WireDecodingError.self) { _ = try Request.decode(frame) }
    }

    @Test func countingStopsPastTheLimit() {
        #expect(count(unknownFields(2_000_000), stoppingPast: 256) == 257)
        #expect(count(unknownFields(100), stoppingPast: 256) == 101)
    }

    @Test func aRequestAtTheLimitIsReadAndOneMoreFieldIsRefused() throws {
        let atLimit = unknownFields(Request.maximumFieldCount - 1)
        #expect(count(atLimit) == Request.maximumFieldCount)
        let request = try Request.decode(atLimit)
        #expect(request.id == 7)
        #expect(request.method == .unknown)

        let over = unknownFields(Request.maximumFieldCount)
        let error = #expect(throws: WireDecodingError.self) { _ = try Request.decode(over) }
        #expect(error?.tooManyFields == true)
    }

    @Test func fourMiBOfUnknownFieldsIsRefusedUnread() {
        let frame = unknownFields(Framing.defaultMaximumFrameBytes / 2 - 1)
        #expect(frame.count == Framing.defaultMaximumFrameBytes)
        let error = #expect(throws: WireDecodingError.self) { _ = try Request.decode(frame) }
        #expect(error?.tooManyFields == true)
    }

    @Test func oneLargeUnknownFieldIsReadAsOneField() throws {
        // id 42, then field 99 (unknown) holding 4 MiB − 8 bytes: a newer client's big field.
        let pad = Framing.defaultMaximumFrameBytes - 8
        let frame: [UInt8] = [0x08, 0x2A, 0x9A, 0x06] + varint(pad) + [UInt8](repeating: 0x18, count: pad)
        #expect(count(frame) == 2)
        let request = try Request.decode(frame)
        #expect(request.id == 42)
        #expect(request.method == .unknown)
    }

    @Test func aMalformedFrameIsStillMalformedNotTooLarge() {
        // Long enough to be scanned (over 512 bytes), few fields, cut short at the end.
        let frame: [UInt8] = [0x08, 0x07, 0x4A] + varint(600) + [UInt8](repeating: 0x41, count: 600) + [0x18]
        #expect(count(frame) == 3)
        let error = #expect(throws: WireDecodingError.self) { _ = try Request.decode(frame) }
        #expect(error?.tooManyFields == false)
    }

    private func varint(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        var v = UInt64(n)
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }
}
