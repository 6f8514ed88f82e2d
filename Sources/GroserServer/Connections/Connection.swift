import GroserSystem
import GroserWire

/// One client connection, owned by the event loop that accepted it: its
/// socket and who is on the other end, and its protocol state
/// (`ConnectionStateMachine`), which decides what happens; this class only
/// does the writes it asks for.
///
/// A connection that keeps up holds no buffers: the loop reads into and
/// answers from its own buffers, and a connection's buffers are filled only
/// with the unfinished tail of a frame or with answers the socket did not
/// take, and given back once drained.
final class Connection {
    let socket: Socket
    let peer: PeerCredentials?
    /// Counts connections since start (`#N` in logs); tells this connection
    /// from a later one that reuses its descriptor.
    let serial: UInt64
    /// Closed with the connection, so its queued cart requests are skipped.
    let token = ConnectionToken()
    // Exclusivity is not checked at run time (about 80 instructions per
    // access, several per request): only the owning loop's thread touches a
    // connection.
    @exclusivity(unchecked) var machine: ConnectionStateMachine
    /// The events epoll watches for on this connection.
    @exclusivity(unchecked) var registered: EpollEvents = [.readable, .readHangup]
    /// The decoder's storage as last added to the loops' shared total.
    @exclusivity(unchecked) var accountedFrameBytes = 0
    /// The loop's answer turn in which this connection last got answers
    /// from a shard (so each turn finishes it once).
    @exclusivity(unchecked) var answerTurn: UInt64 = 0
    /// The connection's watches, in the order they started.
    @exclusivity(unchecked) var watchers: [Watcher] = []
    /// The key of the session token the connection sent last.
    @exclusivity(unchecked) var sessionKeys = SessionKeyMemo()
    /// The session token and store uid the connection sent last, reused
    /// by the request reader when sent again.
    @exclusivity(unchecked) var repeatedStrings = RepeatedStrings()
    /// Whether the peer is an operator, once asked.
    @exclusivity(unchecked) private var peerIsOperator: Bool?

    init(socket: Socket, peer: PeerCredentials?, serial: UInt64, limits: ConnectionStateMachine.Limits, now: UInt64) {
        self.socket = socket
        self.peer = peer
        self.serial = serial
        self.machine = ConnectionStateMachine(limits: limits, now: now)
    }

    /// Whether the peer may call the operators' methods, by `rule` (which
    /// may read the group database): asked at the first frame that names
    /// one, and remembered for the connection's life.
    func isOperator(by rule: (Caller) -> Bool) -> Bool {
        if let known = peerIsOperator { return known }
        let answer = peer.map { rule(Caller(uid: $0.uid, gid: $0.gid)) } ?? false
        peerIsOperator = answer
        return answer
    }

    /// The events the machine wants epoll to report.
    var wantedEvents: EpollEvents {
        var wanted: EpollEvents = []
        if machine.isReading { wanted.formUnion([.readable, .readHangup]) }
        if machine.wantsToWrite { wanted.insert(.writable) }
        return wanted
    }

    /// Writes as much owed output as the socket takes. Returns false when
    /// the connection failed and must be closed.
    func flush(now: UInt64) -> Bool {
        while machine.pendingOutputBytes > 0 {
            let result = machine.output.withFirstBytes { raw in
                Result { () throws(Errno) -> IOResult in try socket.write(raw) }
            }
            switch result {
            case .success(.processed(let n)): machine.wrote(n, now: now)
            case .success(.wouldBlock):
                machine.writeBlocked(now: now)
                return true
            case .failure:
                return false
            }
        }
        return true
    }
}
