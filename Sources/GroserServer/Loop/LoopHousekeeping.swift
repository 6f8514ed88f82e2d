import GroserSystem
import GroserWire

/// An event loop's housekeeping, once a second: when it is due, which
/// connection the unfinished-frame budget cuts off, what a cut-off says,
/// and giving idle memory back. The loop's thread only; the loop closes
/// the connections.
struct LoopHousekeeping {
    private var lastSweep: UInt64 = 0

    /// The loop keeps an output buffer up to this size between reads...
    static let retainedOutputCapacity = 4 * 1024 * 1024
    /// ...and, once a second, no more than this one unless it holds answers.
    static let idleOutputCapacity = 64 * 1024
    /// Freed heap memory kept before the sweep gives it back to the kernel.
    static let freeHeapBytesKept = 1 << 20

    /// True once a second: then the loop sweeps its connections' timeouts.
    mutating func sweepDue(now: UInt64) -> Bool {
        guard now &- lastSweep >= 1_000_000_000 else { return false }
        lastSweep = now
        return true
    }

    /// Gives back memory a burst left behind. The answer buffer keeps its
    /// room between reads, but not for good: a large empty one goes, so a
    /// burst of large answers does not stay resident (it is grown again
    /// when needed). Owed output lives in heap chunks (OutputChunks), whose
    /// pages the heap keeps unless they are given back.
    static func trim(_ output: inout [UInt8]) {
        if output.isEmpty && output.capacity > idleOutputCapacity { output = [] }
        Allocator.returnFreeMemory(ifMoreThan: freeHeapBytesKept)
    }

    /// The holder the unfinished-frame budget cuts off: the one holding
    /// the most bytes and, among equal holdings, the frame that began first
    /// (a client that stopped sending, rather than one whose frame is
    /// still streaming in). Nil when nobody holds any.
    static func largestHolder<Holder>(_ holders: some Sequence<Holder>, bytes: (Holder) -> Int,
                                      since: (Holder) -> UInt64) -> Holder? {
        var largest: Holder?
        for c in holders where bytes(c) > 0 {
            guard let l = largest else { largest = c; continue }
            if bytes(c) > bytes(l) || bytes(c) == bytes(l) && since(c) < since(l) { largest = c }
        }
        return largest
    }

    /// The status a connection cut off by the budget gets.
    static func budgetRefusal(limit: Int, announced: Int?) -> Status {
        Status(.resourceExhausted,
               "groserd holds more than its maximum of \(limit) bytes in frames still arriving, and this connection's\(announced.map { " frame of \($0) bytes" } ?? " unfinished frame") is the largest; the connection will be closed.")
    }

    /// A frame that did not arrive within `timeoutSeconds`: the timeout as
    /// the log line says it, and the status the connection gets.
    static func frameTimeout(buffered: Int, announced: Int?, timeoutSeconds: Double) -> (seconds: String, status: Status) {
        let seconds = timeoutSeconds == timeoutSeconds.rounded() ? "\(Int(timeoutSeconds)) s" : "\(timeoutSeconds) s"
        let what = announced.map { "The frame of \($0) bytes" } ?? "The frame's header"
        return (seconds, Status(.resourceExhausted,
                                "\(what) did not arrive within \(seconds) of its first byte (\(buffered) bytes came); the connection will be closed."))
    }
}
