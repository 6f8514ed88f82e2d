import GroserSystem
import GroserWire

/// How an event loop takes new connections: accepting from the shared
/// listener, admission by peer, the round-robin hand-off to every loop.
extension EventLoop {
    func acceptAll() {
        // Bounded, so one loop does not spend a whole burst accepting; the
        // connections go round robin to every loop (ConnectionHandoff).
        for _ in 0..<64 {
            let accepted: Socket?
            do {
                accepted = try listener.accept()
            } catch {
                if error == .tooManyOpenFiles || error == .tooManyOpenFilesInSystem {
                    // Out of descriptors: stop polling the listener for a
                    // moment, or level-triggered epoll would spin on it.
                    logger.warning("loop \(index): cannot accept: \(error); pausing accepts for 100 ms")
                    stopListening()
                    acceptPausedUntil = monotonicNanoseconds() + 100_000_000
                } else {
                    logger.warning("loop \(index): accept failed: \(error)")
                }
                return
            }
            guard let socket = accepted else { return }
            let peer = try? socket.peerCredentials()
            if let refusal = admission.admit(peer) {
                refuse(socket, refusal)
                continue
            }
            let owner = handoff.nextLoop()
            if owner != index {
                handoff.give(socket, peer, to: owner)
                continue
            }
            adopt(socket, peer)
        }
    }

    /// Starts serving an accepted connection on this loop.
    func adopt(_ socket: Socket, _ peer: PeerCredentials?) {
        let serial = counters.nextConnectionID.add(1, ordering: .relaxed).newValue
        counters.connectionsAccepted.add(1, ordering: .relaxed)
        let connection = Connection(socket: socket, peer: peer, serial: serial,
                                    limits: connectionLimits, now: monotonicNanoseconds())
        do {
            try epoll.add(socket.descriptor, events: [.readable, .readHangup], token: UInt64(socket.descriptor))
        } catch {
            logger.warning("loop \(index): cannot watch a new connection: \(error)")
            admission.release(peer)
            socket.close()
            return
        }
        connections[socket.descriptor] = connection
        logger.debug("loop \(index): connection #\(serial) from pid \(connection.peer?.pid ?? -1) uid \(connection.peer?.uid ?? 0)")
    }

    /// Over a limit (`PeerConnectionLimits`): one frame with its status
    /// (if the socket takes it at once), then close.
    private func refuse(_ socket: Socket, _ status: Status) {
        var frame: [UInt8] = []
        ResponseFrameWriter.appendStatus(id: 0, status: status, to: &frame)
        _ = frame.withUnsafeBytes { try? socket.write($0) }
        socket.close()
        guard let skipped = admission.refusalLogLine(now: monotonicNanoseconds()) else { return }
        logger.warning("loop \(index): refused a connection: \(status.message)\(skipped > 0 ? " (\(skipped) more refused since the last such line)" : "")")
    }

    /// What every connection of this daemon may hold and wait for.
    private var connectionLimits: ConnectionStateMachine.Limits {
        ConnectionStateMachine.Limits(
            maximumFrameBytes: config.maximumFrameBytes, maximumPendingOutputBytes: config.maximumPendingOutputBytes,
            watchOutputLimit: WatchFanOut.outputLimit,
            slowReaderTimeout: UInt64(config.slowReaderTimeoutSeconds * 1e9),
            idleTimeout: UInt64(config.idleTimeoutSeconds * 1e9),
            frameReadTimeout: UInt64(config.frameReadTimeoutSeconds * 1e9))
    }
}
