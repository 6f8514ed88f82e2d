import GroserSystem
import Synchronization

/// The bytes every connection holds in frames still arriving, shared by all
/// event loops, against one budget (`--max-unfinished-frame-bytes`).
///
/// Each loop adds and subtracts its connections' holdings with one atomic
/// add, and only when a holding changes, so a client whose frames arrive
/// whole costs nothing here. A connection is closed by the loop that owns
/// it, so closing the largest holder first across loops works by hand-off:
/// each loop publishes the size of its largest holding (updated when a
/// holding grows past it, recomputed exactly whenever the loop enforces the
/// budget). A loop that finds the total over budget closes its own largest
/// holder, unless another loop has published a larger one: then it asks
/// that loop to check (a flag and a wake) and stops. A published figure can
/// be stale only on the high side (a holding that shrank or closed), and a
/// loop asked to check publishes a fresh one before deciding, so the loop
/// with the true largest holder is the one that closes it.
final class UnfinishedFrames: Sendable {
    /// What one loop publishes.
    private final class LoopSlot: Sendable {
        let largest = Atomic<Int>(0)
        let checkRequested = Atomic<Bool>(false)
    }

    let limit: Int
    private let total = Atomic<Int>(0)
    private let slots: [LoopSlot]
    /// Wakes loop i; set once the loops exist, read only on a hand-off.
    private let wakers = Locked<[@Sendable () -> Void]>([])

    init(limit: Int, loops: Int) {
        self.limit = limit
        slots = (0..<max(1, loops)).map { _ in LoopSlot() }
    }

    /// Tells the budget how to wake each loop, in index order.
    func attach(wakers: [@Sendable () -> Void]) {
        self.wakers.withLock { $0 = wakers }
    }

    /// Bytes held in unfinished frames across all loops now.
    var bytes: Int { total.load(ordering: .relaxed) }

    /// Adds a change of one connection's holding; returns the new total.
    func add(_ delta: Int) -> Int {
        total.add(delta, ordering: .relaxed).newValue
    }

    /// Publishes loop `index`'s largest holding.
    func publish(largest: Int, loop index: Int) {
        slots[index].largest.store(largest, ordering: .relaxed)
    }

    /// The loop other than `index` that published the largest holding above
    /// `size`, if any.
    func loop(holdingMoreThan size: Int, besides index: Int) -> Int? {
        var best: (loop: Int, size: Int)?
        for (i, slot) in slots.enumerated() where i != index {
            let s = slot.largest.load(ordering: .relaxed)
            if s > size && s > (best?.size ?? 0) { best = (i, s) }
        }
        return best?.loop
    }

    /// Asks loop `index` to enforce the budget on its own connections.
    func requestCheck(loop index: Int) {
        slots[index].checkRequested.store(true, ordering: .relaxed)
        let wake = wakers.withLock { $0.indices.contains(index) ? $0[index] : nil }
        wake?()
    }

    /// True once for each request to loop `index` to check.
    func takeCheckRequest(loop index: Int) -> Bool {
        slots[index].checkRequested.exchange(false, ordering: .relaxed)
    }
}
