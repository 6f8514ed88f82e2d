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
    let socket: Socket
    let peer: PeerCredentials?
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

    init(socket: Socket, peer: PeerCredentials?, maximumFrameBytes: Int) {
        self.socket = socket
        self.peer = peer
        self.decoder = FrameDecoder(maximumFrameBytes: maximumFrameBytes, initialCapacity: 0)
    }

    var pendingOutputBytes: Int { output.count - outputOffset }

    /// Writes as much pending output as the socket takes. Returns false when
    /// the connection failed and must be closed.
    func flush() -> Bool {
        guard outputOffset < output.count else { return true }
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
        output = []
        outputOffset = 0
        return true
    }
}
