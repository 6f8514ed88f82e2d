/// A connection's output not yet taken by its socket: bytes in chunks of at
/// most `chunkBytes`, oldest first.
///
/// Not one growing array: groserd fixes glibc's mmap threshold at 128 KiB
/// (`Allocator.mapBlocksSeparately`, RELIABILITY.md), so an array of owed
/// output past that size was a fresh mapping each time, faulted in page by
/// page and unmapped once written. At c=50 P=16, sixteen 101 KB stores per
/// connection made 35 page faults and a quarter of an mmap/munmap pair per
/// answer, and get-store `--products` ran at 0.5x Redis (perf: page faults,
/// page clearing and unmapping led the loops' profile). Chunks below the
/// threshold come from malloc's heap and are used again.
public struct OutputChunks {
    /// Below glibc's fixed 128 KiB mmap threshold, with room for malloc's
    /// and the array's headers.
    public static let chunkBytes = 64 * 1024

    /// Chunks from `head` on are owed; the first from `offset` on.
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    /// Bytes owed.
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// Copies `bytes` in after what is owed: into the last chunk while it
    /// has room, then into new chunks.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        count += rest.count
        if !rest.isEmpty, head < chunks.count {
            let last = chunks.count - 1
            let room = Self.chunkBytes - chunks[last].count
            if room > 0 {
                let n = min(room, rest.count)
                chunks[last].append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
                rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            }
        }
        while !rest.isEmpty {
            let n = min(Self.chunkBytes, rest.count)
            var chunk: [UInt8] = []
            // A chunk that may grow gets its room at once (growing by
            // doubling would copy it several times).
            chunk.reserveCapacity(n < Self.chunkBytes ? max(n, 4096) : n)
            chunk.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
            chunks.append(chunk)
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Runs `body` with the oldest owed bytes (empty when nothing is owed).
    public func withFirstBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard head < chunks.count else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return chunks[head].withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
    }

    /// The socket took `n` bytes from the front.
    public mutating func consume(_ n: Int) {
        precondition(n <= count, "consumed more output than was owed")
        count -= n
        var left = n
        while left > 0 {
            let inFirst = chunks[head].count - offset
            if left < inFirst {
                offset += left
                return
            }
            left -= inFirst
            // Let the written chunk go now (its memory back to the heap).
            chunks[head] = []
            head += 1
            offset = 0
        }
        if count == 0 { removeAll() } else if head >= 32 && head * 2 >= chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    public mutating func removeAll() {
        chunks = []
        head = 0
        offset = 0
        count = 0
    }

    /// Every owed byte in one array (tests).
    public var bytes: [UInt8] {
        var all: [UInt8] = []
        all.reserveCapacity(count)
        for i in head..<chunks.count { all += i == head ? Array(chunks[i][offset...]) : chunks[i] }
        return all
    }
}
