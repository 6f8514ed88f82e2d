/// Answer frames in an array a worker wrote (a batch's answers, one after
/// another), as the array and the range they take in it: unlike a slice,
/// two runs that follow each other in one array join into one, so a
/// connection's consecutive answers of one batch go to its socket in one
/// write, straight from the worker's array, without being copied first.
public struct FrameRun {
    /// The worker's array (kept alive by the run).
    public let buffer: [UInt8]
    public private(set) var range: Range<Int>

    public init(_ buffer: [UInt8], _ range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= buffer.count, "FrameRun: \(range) is outside its array")
        self.buffer = buffer
        self.range = range
    }

    /// The whole of `frame`.
    public init(_ frame: [UInt8]) { self.init(frame, 0..<frame.count) }

    public var count: Int { range.count }

    /// Takes `next` in when it starts where this run ends, in the same
    /// array; false (and nothing changed) otherwise.
    public mutating func join(_ next: FrameRun) -> Bool {
        guard next.range.lowerBound == range.upperBound,
              buffer.withUnsafeBytes({ a in next.buffer.withUnsafeBytes { b in a.baseAddress == b.baseAddress } }) else { return false }
        range = range.lowerBound..<next.range.upperBound
        return true
    }

    /// Calls `body` with the run's bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The run's bytes, copied.
    public var bytes: [UInt8] { Array(buffer[range]) }
}
