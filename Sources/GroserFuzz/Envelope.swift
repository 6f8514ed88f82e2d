import GroserWire

/// The top level of an encoded Response read by hand: an independent
/// reader to check the server's hand-written envelope against.
struct Envelope {
    var id: UInt64 = 0
    var code = StatusCode.ok
    var message = ""
    /// The body fields present, in order.
    var bodyFields: [UInt32] = []
    /// More frames with this id follow (only a watch's frames say so).
    var continues = false

    init?(_ bytes: ArraySlice<UInt8>) {
        var i = bytes.startIndex
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while i < bytes.endIndex, shift < 64 {
                let b = bytes[i]
                i += 1
                value |= UInt64(b & 0x7f) << shift
                if b & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        func delimited() -> ArraySlice<UInt8>? {
            guard let n = varint(), n <= UInt64(bytes.endIndex - i) else { return nil }
            defer { i += Int(n) }
            return bytes[i..<(i + Int(n))]
        }
        while i < bytes.endIndex {
            guard let key = varint() else { return nil }
            switch (key >> 3, key & 7) {
            case (1, 0):
                guard let v = varint() else { return nil }
                id = v
            case (3, 0):
                guard let v = varint() else { return nil }
                continues = v != 0
            case (2, 2):
                guard let status = delimited(), let s = Envelope.status(Array(status)) else { return nil }
                (code, message) = s
            case (let number, 2) where MethodField(rawValue: UInt32(truncatingIfNeeded: number)) != nil:
                guard delimited() != nil else { return nil }
                bodyFields.append(UInt32(key >> 3))
            default:
                return nil
            }
        }
    }

    /// Status { code = 1; message = 2 }.
    private static func status(_ bytes: [UInt8]) -> (StatusCode, String)? {
        var code = StatusCode.ok
        var message = ""
        var i = 0
        while i < bytes.count {
            let key = bytes[i]
            i += 1
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard i < bytes.count, shift < 64 else { return nil }
                let b = bytes[i]
                i += 1
                value |= UInt64(b & 0x7f) << shift
                shift += 7
                if b & 0x80 == 0 { break }
            }
            switch key {
            case 0x08: code = StatusCode(rawValue: Int32(truncatingIfNeeded: value))
            case 0x12:
                guard value <= UInt64(bytes.count - i) else { return nil }
                message = String(decoding: bytes[i..<(i + Int(value))], as: UTF8.self)
                i += Int(value)
            default: return nil
            }
        }
        return (code, message)
    }
}
