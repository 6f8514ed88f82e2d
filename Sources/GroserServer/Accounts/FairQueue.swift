/// Logins and registrations waiting for a hashing thread: one FIFO queue
/// per peer uid, served in turn (round robin), so one uid's flood waits
/// behind itself and never ahead of another uid's request. Bounded per uid
/// and in total. A pure value; the account service holds it under a lock.
struct FairQueue<Element: Sendable>: Sendable {
    /// Jobs one uid may have waiting.
    let perPeer: Int
    /// Jobs waiting over all uids.
    let total: Int
    private var queues: [UInt32?: [Element]] = [:]
    /// The uids with waiting jobs, the next to be served first.
    private var turns: [UInt32?] = []
    private(set) var count = 0

    enum Refusal: Equatable, Sendable {
        /// The uid has `perPeer` jobs waiting.
        case peerFull
        /// `total` jobs wait.
        case full
    }

    init(perPeer: Int, total: Int) {
        self.perPeer = max(1, perPeer)
        self.total = max(1, total)
    }

    /// Queues `element` behind `peer`'s other jobs; the refusal when its
    /// queue, or the whole, is full (nothing is queued then).
    mutating func push(_ element: Element, peer: UInt32?) -> Refusal? {
        let waiting = queues[peer]?.count ?? 0
        if waiting >= perPeer { return .peerFull }
        if count >= total { return .full }
        if waiting == 0 { turns.append(peer) }
        queues[peer, default: []].append(element)
        count += 1
        return nil
    }

    /// The oldest job of the uid whose turn it is (that uid then goes to
    /// the back of the turns); nil when nothing waits.
    mutating func pop() -> Element? {
        guard !turns.isEmpty else { return nil }
        let peer = turns.removeFirst()
        guard var queue = queues.removeValue(forKey: peer), !queue.isEmpty else { return pop() }
        let element = queue.removeFirst()
        if !queue.isEmpty {
            queues[peer] = queue
            turns.append(peer)
        }
        count -= 1
        return element
    }

    /// How many jobs `peer` has waiting.
    func waiting(for peer: UInt32?) -> Int { queues[peer]?.count ?? 0 }
}
