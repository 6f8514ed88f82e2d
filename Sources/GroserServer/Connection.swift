import GroserSystem
import GroserWire

/// One client connection, owned by the event loop that accepted it.
/// The output buffer takes any frame the loop appends, asked for or not,
/// so server-pushed frames need no new machinery.
///
/// A connection that keeps up holds no buffers: the loop reads into and
/// answers from its own buffers, and a connection's buffers are filled only
/// with the unfinished tail of a frame or with answers the socket did not
/// take, and given back once drained.
final class Connection {
    /// An answer kept back to keep request order while an earlier request
    /// waits for the commit queue.
    enum HeldAnswer {
        /// A cart request's answer, still at the commit queue.
        case awaiting
        /// Encoded and ready to go.
        case ready([UInt8])
        /// A catalog request, answered when its turn comes, so it sees any
        /// catalog change an earlier request on this connection made.
        case later(Request, receivedAt: UInt64)
    }

    let socket: Socket
    let peer: PeerCredentials?
    /// Tells this connection from a later one that reuses its descriptor.
    let serial: UInt64
    /// Closed with the connection, so its queued cart requests are skipped.
    let token = ConnectionToken()
    /// Holds a frame whose rest has not arrived yet; empty otherwise.
    // Exclusivity is not checked at run time (about 80 instructions per
    // access, several per request): only the owning loop's thread touches a
    // connection.
    @exclusivity(unchecked) var decoder: FrameDecoder
    /// Encoded response frames not yet written, from `outputOffset` on.
    @exclusivity(unchecked) var output: [UInt8] = []
    @exclusivity(unchecked) var outputOffset = 0
    /// The events epoll watches for on this connection.
    @exclusivity(unchecked) var registered: EpollEvents = [.readable, .readHangup]
    /// No more reading: the peer closed, or the stream is unusable.
    @exclusivity(unchecked) var closeAfterFlush = false
    /// Reading paused until pending output drains (backpressure).
    @exclusivity(unchecked) var readPaused = false
    /// Answers held back behind an awaited one, in request order.
    @exclusivity(unchecked) var held: [(slot: UInt64, answer: HeldAnswer)] = []
    @exclusivity(unchecked) var nextSlot: UInt64 = 0
    /// Reading paused because too many answers are awaited.
    @exclusivity(unchecked) var waitingForAnswers = false
    /// When the connection last read a byte or wrote one (monotonic ns).
    @exclusivity(unchecked) var lastProgress: UInt64
    /// Since when output has been waiting on a client that does not read (0: none).
    @exclusivity(unchecked) var stalledSince: UInt64 = 0
    /// Since when the frame still arriving in `decoder` has been arriving
    /// (monotonic ns; 0: the decoder is empty).
    @exclusivity(unchecked) var unfinishedSince: UInt64 = 0
    /// The decoder's storage as last added to the loops' shared total.
    @exclusivity(unchecked) var accountedFrameBytes = 0
    /// The connection's watches, in the order they started.
    @exclusivity(unchecked) var watchers: [Watcher] = []
    /// How many of `watchers` have a frame waiting.
    @exclusivity(unchecked) var watchersPending = 0

    init(socket: Socket, peer: PeerCredentials?, serial: UInt64, maximumFrameBytes: Int, now: UInt64) {
        self.socket = socket
        self.peer = peer
        self.serial = serial
        self.decoder = FrameDecoder(maximumFrameBytes: maximumFrameBytes, initialCapacity: 0)
        self.lastProgress = now
    }

    var pendingOutputBytes: Int { output.count - outputOffset }

    /// Appends a held answer in the next slot.
    func hold(_ answer: HeldAnswer) -> UInt64 {
        let slot = nextSlot
        nextSlot += 1
        held.append((slot, answer))
        return slot
    }

    /// Fills an awaited slot, then moves every answer now in order to the
    /// output, answering `later` requests with `answer` as their turn comes.
    func fill(slot: UInt64, frame: [UInt8], answer: (Request, UInt64, inout [UInt8]) -> Void) {
        if let i = held.firstIndex(where: { $0.slot == slot }) { held[i].answer = .ready(frame) }
        var done = 0
        loop: while done < held.count {
            switch held[done].answer {
            case .awaiting: break loop
            case .ready(let f): output.append(contentsOf: f)
            case .later(let request, let receivedAt): answer(request, receivedAt, &output)
            }
            done += 1
        }
        held.removeFirst(done)
    }

    /// Writes as much pending output as the socket takes. Returns false when
    /// the connection failed and must be closed.
    func flush(now: UInt64) -> Bool {
        guard outputOffset < output.count else { return true }
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in
                    try socket.write(UnsafeRawBufferPointer(rebasing: raw[outputOffset...]))
                }
            }
            switch result {
            case .success(.processed(let n)):
                outputOffset += n
                lastProgress = now
                stalledSince = 0
            case .success(.wouldBlock):
                if stalledSince == 0 { stalledSince = now }
                return true
            case .failure:
                return false
            }
        }
        output = []
        outputOffset = 0
        stalledSince = 0
        return true
    }
}
