import GroserSystem
import Synchronization

/// Spreads accepted connections over the event loops, round robin. Every
/// loop polls the listening socket, but with EPOLLEXCLUSIVE the kernel
/// keeps waking the same idle loop: in the cart-add benchmark all 50
/// connections landed on one loop and the other stayed idle. So the loop
/// that accepts a connection gives it to the loop whose turn it is, which
/// adopts it when woken. The queues hold only accepted connections not yet
/// adopted, so they are bounded by `--max-connections`.
final class ConnectionHandoff: Sendable {
    /// An accepted socket and its peer, read once at accept.
    typealias Accepted = (socket: Socket, peer: PeerCredentials?)
    private let queues: [Locked<[Accepted]>]
    private let wakers = Locked<[@Sendable () -> Void]>([])
    private let turn = Atomic<Int>(0)

    init(loops: Int) {
        queues = (0..<max(1, loops)).map { _ in Locked([]) }
    }

    func attach(wakers: [@Sendable () -> Void]) { self.wakers.withLock { $0 = wakers } }

    /// The loop that should own the next accepted connection.
    func nextLoop() -> Int {
        queues.count == 1 ? 0 : turn.add(1, ordering: .relaxed).oldValue % queues.count
    }

    /// Queues `socket` for `loop` and wakes it.
    func give(_ socket: Socket, _ peer: PeerCredentials?, to loop: Int) {
        queues[loop].withLock { $0.append((socket, peer)) }
        let wake = wakers.withLock { $0.indices.contains(loop) ? $0[loop] : nil }
        wake?()
    }

    /// What was given to `loop` since it last looked.
    func take(for loop: Int) -> [Accepted] {
        queues[loop].withLock { q in
            defer { q.removeAll() }
            return q
        }
    }
}
