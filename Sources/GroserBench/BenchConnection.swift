import GroserSystem
import GroserWire

/// One connection of the load generator. Its P request frames are encoded
/// once into `batch`; each refill rewrites their ids and sends the whole
/// batch with one write. Answers are parsed in place in `input`. In a mix,
/// each refill copies the read's or the write's frame into each place of the
/// batch instead, and remembers which it sent.
final class BenchConnection {
    let socket: Socket
    /// P copies of the request frame, back to back (a mix: P frames of either kind).
    private let batch: UnsafeMutableRawBufferPointer
    private let frameSize: Int
    private let pipeline: Int
    /// A mix's frames, the read's then the write's; nil for a single method.
    private let kindFrames: UnsafeMutableRawBufferPointer?
    private let readFrameSize: Int
    /// A search's query frames, one after another, sent in turn; nil otherwise.
    private let cycleFrames: UnsafeMutableRawBufferPointer?
    private let cycleRanges: [Range<Int>]
    private let writePercent: Int
    /// Where this connection starts in the mix's cycle of 100 requests.
    private let phase: Int
    /// The kind (0 read, 1 write) of each request of the current batch.
    private let batchKinds: UnsafeMutableBufferPointer<UInt8>
    /// Requests in the current batch.
    private var batchCount = 0
    /// Bytes of the current batch: [sendOffset, sendEnd) not yet written.
    var sendOffset = 0
    var sendEnd = 0
    /// Requests this connection may still send (Int.max in a timed run).
    var remaining: Int
    var nextSequence: UInt64 = 0
    var expectedSequence: UInt64 = 0
    var inFlight = 0
    /// When the current batch was sent.
    var sentAt: UInt64 = 0
    var waitingToWrite = false
    var isOpen = true
    /// The connection's epoll token: its index in the worker's list.
    var token: UInt64 = 0

    /// Received bytes: [readStart, readEnd) not yet parsed.
    private(set) var input: UnsafeMutableRawBufferPointer
    var readStart = 0
    var readEnd = 0
    /// The whole length of a frame whose start has arrived and whose rest has not.
    var pendingFrameBytes = 0
    private static let minimumReadSpace = 16 * 1024

    /// `frames` is one frame, or a mix's read and write frames with the
    /// share of writes and the connection's `phase` in the cycle.
    /// With `cycle`, `frames` are a search's queries, sent in turn from `phase` on.
    init(socket: Socket, frames: [RequestFrame], writePercent: Int = 0, phase: Int = 0, pipeline: Int, requests: Int,
         cycle: Bool = false) {
        precondition(cycle ? !frames.isEmpty : frames.count == 1 || frames.count == 2)
        self.socket = socket
        self.pipeline = pipeline
        self.remaining = requests
        self.writePercent = writePercent
        self.phase = phase
        batchKinds = .allocate(capacity: pipeline)
        batchKinds.initialize(repeating: 0)
        if cycle {
            let all = frames.flatMap(\.bytes)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: all.count, alignment: 8)
            buffer.copyBytes(from: all)
            var ranges: [Range<Int>] = []
            var at = 0
            for f in frames { ranges.append(at..<(at + f.bytes.count)); at += f.bytes.count }
            cycleFrames = buffer
            cycleRanges = ranges
            frameSize = frames.map(\.bytes.count).max()!
            batch = .allocate(byteCount: frameSize * pipeline, alignment: 8)
            kindFrames = nil
            readFrameSize = frameSize
        } else if frames.count == 1 {
            cycleFrames = nil
            cycleRanges = []
            let size = frames[0].bytes.count
            let batch = UnsafeMutableRawBufferPointer.allocate(byteCount: size * pipeline, alignment: 8)
            frames[0].bytes.withUnsafeBytes { one in
                for i in 0..<pipeline { (batch.baseAddress! + i * size).copyMemory(from: one.baseAddress!, byteCount: size) }
            }
            frameSize = size
            self.batch = batch
            kindFrames = nil
            readFrameSize = size
        } else {
            cycleFrames = nil
            cycleRanges = []
            let read = frames[0].bytes, write = frames[1].bytes
            let both = UnsafeMutableRawBufferPointer.allocate(byteCount: read.count + write.count, alignment: 8)
            both.copyBytes(from: read + write)
            kindFrames = both
            readFrameSize = read.count
            frameSize = max(read.count, write.count)
            batch = .allocate(byteCount: frameSize * pipeline, alignment: 8)
        }
        input = .allocate(byteCount: 64 * 1024, alignment: 8)
    }

    deinit {
        batch.deallocate()
        kindFrames?.deallocate()
        cycleFrames?.deallocate()
        batchKinds.deallocate()
        input.deallocate()
        if socket.isOpen { socket.close() }
    }

    /// Rewrites the ids of the next `min(P, remaining)` requests (a mix:
    /// writes each one's frame first); returns how many.
    func prepareBatch() -> Int {
        let count = min(pipeline, remaining)
        let base = batch.baseAddress!
        if let cycleFrames {
            var offset = 0
            for _ in 0..<count {
                let r = cycleRanges[Int((nextSequence + UInt64(phase)) % UInt64(cycleRanges.count))]
                (base + offset).copyMemory(from: cycleFrames.baseAddress! + r.lowerBound, byteCount: r.count)
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + offset + RequestFrame.idOffset)
                offset += r.count
                nextSequence += 1
            }
            sendEnd = offset
        } else if let kindFrames {
            var offset = 0
            for i in 0..<count {
                let write = BenchMethod.mixSendsWrite(sequence: nextSequence, phase: phase, percent: writePercent)
                let size = write ? kindFrames.count - readFrameSize : readFrameSize
                (base + offset).copyMemory(from: kindFrames.baseAddress! + (write ? readFrameSize : 0), byteCount: size)
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + offset + RequestFrame.idOffset)
                batchKinds[i] = write ? 1 : 0
                offset += size
                nextSequence += 1
            }
            sendEnd = offset
        } else {
            for i in 0..<count {
                RequestFrame.writeID(RequestFrame.id(sequence: nextSequence), into: base + i * frameSize + RequestFrame.idOffset)
                nextSequence += 1
            }
            sendEnd = count * frameSize
        }
        remaining -= count
        inFlight = count
        batchCount = count
        sendOffset = 0
        return count
    }

    /// The kind (0 read, 1 write; 0 for a single method) of the answer
    /// expected next.
    @inline(__always)
    var kindOfNextAnswer: Int { Int(batchKinds[batchCount - inFlight]) }

    /// The kinds of the requests in flight, in order.
    var kindsInFlight: [Int] { (batchCount - inFlight..<batchCount).map { Int(batchKinds[$0]) } }

    var unsent: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(batch)[sendOffset..<sendEnd])
    }

    /// Free space after `readEnd`, made large enough for the frame in
    /// progress by moving unread bytes to the front and growing.
    func readSpace() -> UnsafeMutableRawBufferPointer {
        if readStart == readEnd { readStart = 0; readEnd = 0 }
        if input.count - readEnd < Self.minimumReadSpace || input.count - readStart < pendingFrameBytes {
            let unread = readEnd - readStart
            if readStart > 0 {
                input.baseAddress!.copyMemory(from: input.baseAddress! + readStart, byteCount: unread)
                readStart = 0
                readEnd = unread
            }
            let wanted = max(unread + Self.minimumReadSpace, pendingFrameBytes)
            if input.count < wanted {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(input.count * 2, wanted), alignment: 8)
                grown.baseAddress!.copyMemory(from: input.baseAddress!, byteCount: unread)
                input.deallocate()
                input = grown
            }
        }
        return UnsafeMutableRawBufferPointer(rebasing: input[readEnd...])
    }
}
