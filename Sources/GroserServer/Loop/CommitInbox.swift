import GroserSystem
import GroserWire

/// Answers from the worker threads on their way back to one event loop: a
/// locked array the workers append to, taken whole by the loop with its
/// spare array swapped in (so neither is allocated again each turn), and
/// one wakeup per batch of answers rather than one per answer.
final class CommitInbox: @unchecked Sendable {
    // @unchecked: `spare` is touched only by the loop's thread (`take`,
    // `recycle`); the workers touch only `answers`, behind its lock.
    /// One answer: where it goes (the connection's descriptor and serial,
    /// its slot there) and what Stats counts of it.
    /// The frame is a run of the array its batch's answers were written
    /// into. A struct, not a tuple: a tuple's field read through a pointer
    /// copied the whole tuple.
    struct Answer {
        let address: Address
        let frame: FrameRun
        /// The answer's status when the worker says it (nil: read from the frame).
        var status: StatusCode? = nil
        var fd: Int32 { address.fd }
        var serial: UInt64 { address.serial }
        var slot: UInt64 { address.slot }
        var method: MethodField? { address.method }
        var receivedAt: UInt64 { address.receivedAt }
    }

    private let answers = Locked<[Answer]>([])
    /// The other array, swapped in when the loop takes the answers.
    @exclusivity(unchecked) private var spare: [Answer] = []
    private let wake: @Sendable () -> Void
    /// The most room a taken array keeps for the next turn.
    static let retainedCapacity = 4096

    /// `wake` wakes the loop (an eventfd write); called from worker threads.
    init(wake: @escaping @Sendable () -> Void) { self.wake = wake }

    /// Where one answer goes, and what Stats counts of it.
    struct Address: Sendable {
        var fd: Int32
        var serial: UInt64
        var slot: UInt64
        var method: MethodField?
        var receivedAt: UInt64
    }

    /// Where a worker sends a request's whole response frame.
    func reply(fd: Int32, serial: UInt64, slot: UInt64, method: MethodField?, receivedAt: UInt64) -> CommerceJob.Reply {
        .inbox(self, Address(fd: fd, serial: serial, slot: slot, method: method, receivedAt: receivedAt))
    }

    /// Called by a worker with a request's whole response frame.
    func post(_ frame: FrameRun, status: StatusCode? = nil, to a: Address) {
        // The loop takes the whole inbox when it wakes, so only the
        // answer that finds it empty needs to wake it.
        let first = answers.withLock { answers in
            answers.append(Answer(address: a, frame: frame, status: status))
            return answers.count == 1
        }
        if first { wake() }
    }

    /// Every answer posted so far, in the order posted. The loop's thread only.
    func take() -> [Answer] {
        // Moved out of `spare` (not copied: a shared buffer would be copied
        // by the first worker to append to the inbox).
        var taken: [Answer] = []
        swap(&taken, &spare)
        answers.withLock { swap(&$0, &taken) }
        return taken
    }

    /// Gives a taken array back for the next turn, its room kept (bounded).
    /// The loop's thread only.
    func recycle(_ taken: consuming [Answer]) {
        var taken = taken
        taken.removeAll(keepingCapacity: taken.capacity <= Self.retainedCapacity)
        spare = taken
    }
}
