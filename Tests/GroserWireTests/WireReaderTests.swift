import GroserWire
import Testing

@Suite("the one wire reader")
struct WireReaderTests {
    static let values: [UInt64] = [0, 1, 127, 128, 300, 16_383, 16_384, 1 << 35, UInt64(UInt32.max), (1 << 63) - 1, 1 << 63, .max]

    @Test(arguments: values)
    func varintsReadAsWritten(value: UInt64) {
        var bytes: [UInt8] = []
        ProtoWriter.appendVarint(value, to: &bytes)
        bytes.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let r1 = reader.varint()
            #expect(r1 == value)
            #expect(reader.atEnd)
            var bounded = WireReader(raw)
            let r2 = bounded.varint(maxBytes: 10)
            #expect(r2 == value)
            var tooShort = WireReader(raw)
            let r3 = tooShort.varint(maxBytes: bytes.count - 1)
            #expect(r3 == nil)
            for cut in 0..<bytes.count {
                var truncated = WireReader(UnsafeRawBufferPointer(rebasing: raw[..<cut]))
                let r4 = truncated.varint()
                #expect(r4 == nil)
            }
        }
    }

    @Test func aVarintLongerThanTenBytesIsRefusedAfterTen() {
        let bytes = [UInt8](repeating: 0x80, count: 11) + [0]
        bytes.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let r5 = reader.varint()
            #expect(r5 == nil)
            #expect(reader.offset == 10)
        }
    }

    @Test func lengthDelimitedFieldsAndSkips() {
        // field 1 varint 150, field 2 "hi", field 3 fixed64, field 4 fixed32, then a group start.
        let bytes: [UInt8] = [0x08, 0x96, 0x01, 0x12, 0x02, 0x68, 0x69, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4, 0x2b]
        bytes.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let r6 = reader.varint()
            #expect(r6 == 1 << 3)
            let r7 = reader.skip(wireType: 0)
            #expect(r7)
            let r8 = reader.varint()
            #expect(r8 == 2 << 3 | 2)
            let r9 = reader.lengthDelimited()
            #expect(r9.map { Array($0) } == [0x68, 0x69])
            let r10 = reader.varint()
            #expect(r10 == 3 << 3 | 1)
            let r11 = reader.skip(wireType: 1)
            #expect(r11)
            let r12 = reader.varint()
            #expect(r12 == 4 << 3 | 5)
            let r13 = reader.skip(wireType: 5)
            #expect(r13)
            let r14 = reader.varint()
            #expect(r14 == 5 << 3 | 3)
            let r15 = reader.skip(wireType: 3)
            #expect(!r15)
        }
        // A length past the end, and one longer than the bound.
        ([0x05, 0x61] as [UInt8]).withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let r16 = reader.lengthDelimited()
            #expect(r16 == nil)
        }
        ([0x80, 0x80, 0x80, 0x00] as [UInt8]).withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let r17 = reader.lengthDelimited(maxLengthBytes: 3)
            #expect(r17 == nil)
        }
        ([0x01, 0x00, 0x00] as [UInt8]).withUnsafeBytes { raw in
            var reader = WireReader(raw, offset: 1)
            let r18 = reader.skip(wireType: 1)
            #expect(!r18)
            #expect(reader.offset == 1)
        }
    }
}

@Suite("base64 for page tokens: URL-safe, unpadded, nothing else read")
struct URLBase64Tests {
    @Test(arguments: [[], [0], [0xFB], [0xFB, 0xFF], [0xFB, 0xFF, 0xBF], Array(0...40)] as [[UInt8]])
    func roundTrips(bytes: [UInt8]) {
        let text = Base64.encode(bytes, url: true)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(Base64.decode(text, url: true) == bytes)
        #expect(Base64.decode(text) == bytes)
    }

    @Test(arguments: ["+_8", "-/8", "-_8=", "A", "!!"])
    func standardSpellingsArePageTokenForgeries(text: String) {
        #expect(Base64.decode(text, url: true) == nil)
    }
}
