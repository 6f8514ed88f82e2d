/// Why a byte stream cannot be split into frames.
public enum FrameError: Error, Hashable, Sendable {
    /// The length prefix announces more than the maximum; the stream cannot
    /// be resynchronised, so the connection must close.
    case frameTooLarge(length: UInt32, maximum: Int)
}

/// The frame layout: a 4-byte big-endian length, then that many bytes.
public enum Framing {
    /// Bytes in the length prefix.
    public static let headerSize = 4
    /// The default maximum frame body: 4 MiB.
    public static let defaultMaximumFrameBytes = 4 * 1024 * 1024

    /// Writes the 4-byte big-endian length prefix of a body of `length` bytes.
    @inlinable
    public static func appendHeader(length: Int, to buffer: inout [UInt8]) {
        let n = UInt32(truncatingIfNeeded: length)
        buffer.append(UInt8(truncatingIfNeeded: n >> 24))
        buffer.append(UInt8(truncatingIfNeeded: n >> 16))
        buffer.append(UInt8(truncatingIfNeeded: n >> 8))
        buffer.append(UInt8(truncatingIfNeeded: n))
    }

    /// The first whole frame in `bytes`: its body and the bytes it takes
    /// with its header; nil when `bytes` holds only part of one. Lets a
    /// reader answer frames straight from its read buffer, with the same
    /// length check as `FrameDecoder`, before anything is buffered.
    @inlinable
    public static func firstFrame(
        in bytes: UnsafeRawBufferPointer, maximumFrameBytes: Int
    ) throws(FrameError) -> (body: UnsafeRawBufferPointer, byteCount: Int)? {
        guard bytes.count >= headerSize else { return nil }
        let length = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        guard Int(length) <= maximumFrameBytes else {
            throw .frameTooLarge(length: length, maximum: maximumFrameBytes)
        }
        let total = headerSize + Int(length)
        guard bytes.count >= total else { return nil }
        return (UnsafeRawBufferPointer(rebasing: bytes[headerSize..<total]), total)
    }

    /// One whole frame: header and body.
    public static func frame(_ body: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerSize + body.count)
        appendHeader(length: body.count, to: &out)
        out.append(contentsOf: body)
        return out
    }
}

/// Splits a byte stream into frames. A value type with no I/O: feed it bytes
/// with `append` (or read straight into it with `writeTail`), then call `next()`
/// until it answers nil ("need more bytes").
///
/// The length prefix is checked against the maximum before any byte of the
/// body is buffered, so an announced 4 GiB frame costs nothing.
public struct FrameDecoder: Sendable {
    public let maximumFrameBytes: Int
    /// The received bytes are `readIndex..<writeIndex`; those before are
    /// already returned as frames. The array's capacity is chosen here,
    /// never by its own growth, and its count only reaches past
    /// `writeIndex` where `writeTail` zeroed room for a read: bytes that
    /// only `append` fills are never written before they arrive, so pages
    /// of a large buffer that no byte has reached yet cost no memory.
    private var storage: [UInt8] = []
    private var readIndex = 0
    private var writeIndex = 0
    private static let shrinkThreshold = 1 << 20

    /// `initialCapacity` 0 allocates nothing until the first byte arrives.
    public init(maximumFrameBytes: Int = Framing.defaultMaximumFrameBytes, initialCapacity: Int = 16 * 1024) {
        self.maximumFrameBytes = maximumFrameBytes
        if initialCapacity > 0 { storage.reserveCapacity(initialCapacity) }
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { writeIndex - readIndex }

    /// Bytes of memory the buffer holds, used or not: what a server counts
    /// against its budget for frames still arriving.
    public var storageByteCount: Int { storage.capacity }

    /// The body length announced by the frame at the front of the buffer,
    /// once its whole header has arrived; nil before that.
    public var announcedBodyLength: Int? {
        guard writeIndex - readIndex >= Framing.headerSize else { return nil }
        return Int(storage.withUnsafeBytes { raw -> UInt32 in
            var n: UInt32 = 0
            for i in 0..<Framing.headerSize { n = n << 8 | UInt32(raw[readIndex + i]) }
            return n
        })
    }

    /// Gives the buffer back when nothing is buffered, so an idle
    /// connection holds no memory; the next byte allocates again.
    public mutating func releaseStorageIfEmpty() {
        if readIndex == writeIndex && storage.capacity > 0 { removeAll() }
    }

    /// Drops every buffered byte, whole frames included, and gives the
    /// buffer back: for a stream that will not be read further.
    public mutating func removeAll() {
        storage = []
        readIndex = 0
        writeIndex = 0
    }

    /// Appends received bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        reserveTail(bytes.count)
        // Over room `writeTail` zeroed, then past the array's count.
        let overwritten = min(bytes.count, storage.count - writeIndex)
        if overwritten > 0 {
            storage.withUnsafeMutableBytes { raw in
                (raw.baseAddress! + writeIndex).copyMemory(from: bytes.baseAddress!, byteCount: overwritten)
            }
        }
        if overwritten < bytes.count {
            UnsafeRawBufferPointer(rebasing: bytes[overwritten...]).withMemoryRebound(to: UInt8.self) {
                storage.append(contentsOf: $0)
            }
        }
        writeIndex += bytes.count
    }

    /// Appends received bytes.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes { append($0) }
        }
    }

    /// Lets a reader write up to `capacity` bytes straight into the buffer;
    /// `body` returns how many it wrote (or throws).
    public mutating func writeTail<E: Error>(
        capacity: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> Int
    ) throws(E) -> Int {
        reserveTail(capacity)
        let start = writeIndex
        if storage.count < start + capacity {
            // Zeroed once: later reads into the same room reuse it.
            storage.append(contentsOf: repeatElement(0, count: start + capacity - storage.count))
        }
        let result = storage.withUnsafeMutableBytes { raw in
            Result { () throws(E) -> Int in
                try body(UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + capacity)]))
            }
        }
        let written = try result.get()
        precondition(written >= 0 && written <= capacity)
        writeIndex += written
        return written
    }

    /// The next whole frame's body, or nil when more bytes are needed.
    /// The returned slice shares the buffer: use it before the next append.
    public mutating func next() throws(FrameError) -> ArraySlice<UInt8>? {
        let available = writeIndex - readIndex
        guard available >= Framing.headerSize else { return nil }
        let length = storage.withUnsafeBytes { raw -> UInt32 in
            var n: UInt32 = 0
            for i in 0..<Framing.headerSize { n = n << 8 | UInt32(raw[readIndex + i]) }
            return n
        }
        guard Int(length) <= maximumFrameBytes else {
            throw .frameTooLarge(length: length, maximum: maximumFrameBytes)
        }
        let total = Framing.headerSize + Int(length)
        guard available >= total else { return nil }
        let bodyStart = readIndex + Framing.headerSize
        readIndex += total
        let body = storage[bodyStart..<(bodyStart + Int(length))]
        if readIndex == writeIndex {
            // Nothing left over: the next read starts at the front again, and
            // a buffer grown for one large frame is given back (the slice
            // keeps it until the caller is done).
            readIndex = 0
            writeIndex = 0
            if storage.capacity > Self.shrinkThreshold { storage = [] }
        }
        return body
    }

    /// Makes room for `count` more bytes after `writeIndex`, moving unread
    /// bytes to the front before growing.
    private mutating func reserveTail(_ count: Int) {
        if storage.capacity - writeIndex >= count { return }
        let unread = writeIndex - readIndex
        if storage.capacity >= unread + count {
            if unread > 0 {
                storage.withUnsafeMutableBytes { raw in
                    let base = raw.baseAddress!
                    base.copyMemory(from: base + readIndex, byteCount: unread)
                }
            }
        } else {
            let frameByteCount = announcedBodyLength.flatMap { $0 <= maximumFrameBytes ? Framing.headerSize + $0 : nil }
            let newCount = Self.grownCapacity(current: storage.capacity, needed: unread + count, frameByteCount: frameByteCount)
            var grown: [UInt8] = []
            grown.reserveCapacity(newCount)
            grown.append(contentsOf: storage[readIndex..<writeIndex])
            storage = grown
        }
        readIndex = 0
        writeIndex = unread
    }

    /// The size to grow a buffer of `current` bytes to when it must hold
    /// `needed`: doubling (at least 4 KiB), so appends cost amortised
    /// constant time, but never past the end of the frame being received
    /// when its length is known and `needed` fits in it. So an unfinished
    /// frame holds at most its own size, and at most about 2.5 times the
    /// bytes that have arrived of it: a header announcing 4 MiB reserves
    /// 4 KiB, not 4 MiB.
    static func grownCapacity(current: Int, needed: Int, frameByteCount: Int?) -> Int {
        var newCount = max(current * 2, 4096)
        while newCount < needed { newCount *= 2 }
        if let frameByteCount, needed <= frameByteCount, frameByteCount - newCount <= newCount / 4 {
            // Within a quarter of the frame's end (or past it): take exactly
            // the frame, rather than growing again for its last bytes.
            newCount = frameByteCount
        }
        return newCount
    }
}
