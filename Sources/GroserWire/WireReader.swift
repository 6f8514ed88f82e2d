/// Reads the Protobuf wire format from bytes in memory, allocating nothing:
/// the one varint and field reader of the daemon (the request fast path, the
/// frame peeks, protobuf-c's field scan), the bench and search. Every read
/// answers nil (or false) on truncated or malformed input instead of reading
/// past the end. (The fuzz harness keeps a reader of its own on purpose: it
/// is the oracle this one is checked against.)
///
/// It is `@inlinable` and its reads `@inline(__always)` so that the request
/// fast path, measured in instructions per request, compiles to the loop it
/// had when it carried a private copy.
public struct WireReader {
    /// The bytes read.
    public let bytes: UnsafeRawBufferPointer
    /// Where the next read starts; may be moved by a caller that skips.
    public var offset: Int

    @inlinable @inline(__always)
    public init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// True when nothing is left to read.
    @inlinable
    public var atEnd: Bool {
        @inline(__always) get { offset >= bytes.count }
    }

    /// A varint (at most ten bytes, 64 bits); nil when it runs off the end or
    /// is longer. The offset moves past the bytes looked at either way.
    @inlinable @inline(__always)
    public mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count && shift < 64 {
            if varintByte(into: &result, shift: &shift) { return result }
        }
        return nil
    }

    /// A varint of at most `maxBytes` bytes, for a reader that knows how
    /// long the fields it takes can be (the request fast path refuses
    /// anything longer). With `maxBytes` 10 it reads what `varint()` reads;
    /// the two bounds are kept apart (the byte is read by one function)
    /// because each compiles to exactly the code its hot caller had before
    /// they shared this type, and one bound for both made longer code.
    @inlinable @inline(__always)
    public mutating func varint(maxBytes: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        let end = min(bytes.count, offset + maxBytes)
        while offset < end {
            if varintByte(into: &result, shift: &shift) { return result }
        }
        return nil
    }

    /// Takes the varint's byte at the offset into `result`; true when it was
    /// the last.
    @inlinable @inline(__always)
    mutating func varintByte(into result: inout UInt64, shift: inout UInt64) -> Bool {
        let b = bytes[offset]
        offset += 1
        result |= UInt64(b & 0x7f) << shift
        if b < 0x80 { return true }
        shift += 7
        return false
    }

    /// A length-delimited field's bytes (after its key); nil when its length
    /// or its bytes run past the end.
    @inlinable @inline(__always)
    public mutating func lengthDelimited() -> UnsafeRawBufferPointer? {
        guard let length = varint() else { return nil }
        return take(length)
    }

    /// The same, its length a varint of at most `maxLengthBytes` bytes.
    @inlinable @inline(__always)
    public mutating func lengthDelimited(maxLengthBytes: Int) -> UnsafeRawBufferPointer? {
        guard let length = varint(maxBytes: maxLengthBytes) else { return nil }
        return take(length)
    }

    /// The next `length` bytes; nil when fewer are left.
    @inlinable @inline(__always)
    mutating func take(_ length: UInt64) -> UnsafeRawBufferPointer? {
        guard length <= UInt64(bytes.count - offset) else { return nil }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    /// Skips the value of a field of `wireType` (after its key); false when
    /// it runs past the end or the wire type is a group (3, 4), which proto3
    /// does not use, or no wire type at all.
    @inlinable
    public mutating func skip(wireType: UInt64) -> Bool {
        switch wireType {
        case 0: return varint() != nil
        case 1: return advance(8)
        case 2: return lengthDelimited() != nil
        case 5: return advance(4)
        default: return false
        }
    }

    @inlinable
    mutating func advance(_ n: Int) -> Bool {
        guard bytes.count - offset >= n else { return false }
        offset += n
        return true
    }
}
