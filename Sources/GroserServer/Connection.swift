import GroserSystem
import GroserWire

/// One client connection, owned by the event loop that accepted it.
/// The output buffer takes any frame the loop appends, asked for or not,
/// so server-pushed frames need no new machinery.
final class Connection {
    let socket: Socket
    let peer: PeerCredentials?
    var decoder: FrameDecoder
    /// Encoded response frames not yet written, from `outputOffset` on.
    var output: [UInt8] = []
    var outputOffset = 0
    /// The events epoll watches for on this connection.
    var registered: EpollEvents = [.readable, .readHangup]
    /// No more reading: the peer closed, or the stream is unusable.
    var closeAfterFlush = false
    /// Reading paused until pending output drains (backpressure).
    var readPaused = false

    /// Tells this connection from a later one that reuses its descriptor.
    let serial: UInt64
    /// Answers held back to keep request order while an earlier request is
    /// still at the commit queue; nil frames are still awaited.
    var held: [(slot: UInt64, frame: [UInt8]?)] = []
    var nextSlot: UInt64 = 0
    /// Reading paused because too many answers are awaited.
    var waitingForAnswers = false
    /// Closed with the connection, so its queued commerce requests are skipped.
    let token = ConnectionToken()

    init(socket: Socket, peer: PeerCredentials?, serial: UInt64, maximumFrameBytes: Int) {
        self.socket = socket
        self.peer = peer
        self.serial = serial
        self.decoder = FrameDecoder(maximumFrameBytes: maximumFrameBytes, initialCapacity: 4096)
    }

    var pendingOutputBytes: Int { output.count - outputOffset }

    /// Fills a held slot and moves every answer now in order to the output.
    func fill(slot: UInt64, frame: [UInt8]) {
        guard let i = held.firstIndex(where: { $0.slot == slot }) else { return }
        held[i].frame = frame
        var ready = 0
        while ready < held.count, let f = held[ready].frame {
            output.append(contentsOf: f)
            ready += 1
        }
        held.removeFirst(ready)
    }

    /// Writes as much pending output as the socket takes. Returns false when
    /// the connection failed and must be closed.
    func flush() -> Bool {
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in
                    try socket.write(UnsafeRawBufferPointer(rebasing: raw[outputOffset...]))
                }
            }
            switch result {
            case .success(.processed(let n)): outputOffset += n
            case .success(.wouldBlock): return true
            case .failure: return false
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 256 * 1024)
        outputOffset = 0
        return true
    }
}
