@testable import GroserServer
import GroserSystem
import GroserWire
import Synchronization
import Testing

/// The event loop's parts that hold logic, without a socket: the commit
/// inbox, the watch fan-out's hand-over, the housekeeping rules and the
/// Stats snapshot.
@Suite("the event loop's parts")
struct LoopPartsTests {
    @Test func theInboxWakesOncePerBatchAndGivesAnswersInOrder() {
        let wakes = Atomic<Int>(0)
        let inbox = CommitInbox(wake: { wakes.add(1, ordering: .relaxed) })
        inbox.reply(fd: 5, serial: 1, slot: 1, method: .getCart, receivedAt: 0)([1] as [UInt8])
        inbox.reply(fd: 5, serial: 1, slot: 2, method: .addItem, receivedAt: 0)([2] as [UInt8])
        #expect(wakes.load(ordering: .relaxed) == 1, "only the answer that found the inbox empty wakes the loop")
        let taken = inbox.take()
        #expect(taken.map(\.slot) == [1, 2] && taken.map { $0.frame.bytes } == [[1], [2]] && taken.map(\.method) == [.getCart, .addItem])
        inbox.recycle(taken)
        #expect(inbox.take().isEmpty)
        inbox.reply(fd: 6, serial: 2, slot: 1, method: nil, receivedAt: 0)([3] as [UInt8])
        #expect(wakes.load(ordering: .relaxed) == 2, "an answer after the loop took the inbox wakes it again")
    }

    private func change(_ store: String, _ version: UInt64) -> StoreChangeRecord {
        StoreChangeRecord(storeUID: store, version: version, catalogVersion: version, reload: false, shelfUIDs: ["shelf"],
                          products: [ProductChange(uid: "p", shelfUID: "shelf", price: Money(minorUnits: 1, currency: "RUB"), outOfStock: false)])
    }

    @Test func eachWatcherTakesItsStoresChangesAndTheMachineHearsOfNewFrames() {
        var machine = ConnectionStateMachine(limits: .init(maximumFrameBytes: 1024, maximumPendingOutputBytes: 1024,
                                                           slowReaderTimeout: 1_000_000_000, frameReadTimeout: 1_000_000_000), now: 1)
        var watchers = [Watcher(id: 1, storeUID: "a", version: 1), Watcher(id: 2, storeUID: "b", version: 1)]
        var coalesced = WatchFanOut.hand([change("a", 2)], reload: nil, to: &watchers, machine: &machine)
        #expect(coalesced == 0 && watchers.map(\.hasPending) == [true, false] && machine.watchesPending == 1)
        coalesced = WatchFanOut.hand([change("a", 3), change("c", 3)], reload: nil, to: &watchers, machine: &machine)
        #expect(coalesced == 1 && machine.watchesPending == 1, "a change merged into a waiting frame is no new frame")
        coalesced = WatchFanOut.hand([], reload: encodedSample, to: &watchers, machine: &machine)
        #expect(watchers.map(\.hasPending) == [true, true] && machine.watchesPending == 2, "after an overflow every watcher reloads")
    }

    @Test func theBudgetCutsOffTheLargestHolderAndAmongEqualsTheOldest() {
        typealias Holder = (name: String, bytes: Int, since: UInt64)
        let holders: [Holder] = [("idle", 0, 0), ("small", 10, 1), ("late", 50, 9), ("early", 50, 3)]
        #expect(LoopHousekeeping.largestHolder(holders, bytes: \.bytes, since: \.since)?.name == "early")
        #expect(LoopHousekeeping.largestHolder(holders.prefix(1), bytes: \.bytes, since: \.since) == nil, "nobody holds a byte")
        #expect(LoopHousekeeping.budgetRefusal(limit: 100, announced: 70).message.contains("frame of 70 bytes is the largest"))
        #expect(LoopHousekeeping.budgetRefusal(limit: 100, announced: nil).message.contains("connection's unfinished frame is the largest"))
    }

    @Test func aFrameTimeoutSaysItsSecondsAndWhatCame() {
        let (seconds, status) = LoopHousekeeping.frameTimeout(buffered: 3, announced: nil, timeoutSeconds: 30)
        #expect(seconds == "30 s" && status.code == .resourceExhausted)
        #expect(status.message == "The frame's header did not arrive within 30 s of its first byte (3 bytes came); the connection will be closed.")
        #expect(LoopHousekeeping.frameTimeout(buffered: 9, announced: 100, timeoutSeconds: 0.5).status.message.hasPrefix("The frame of 100 bytes did not arrive within 0.5 s"))
    }

    @Test func theSweepIsDueOnceASecondAndTrimsOnlyAnEmptyLargeBuffer() {
        var housekeeping = LoopHousekeeping()
        let dues = [2_000_000_000, 2_500_000_000, 3_000_000_000].map { housekeeping.sweepDue(now: $0) }
        #expect(dues == [true, false, true])
        var large: [UInt8] = []
        large.reserveCapacity(LoopHousekeeping.idleOutputCapacity * 2)
        LoopHousekeeping.trim(&large)
        #expect(large.capacity <= LoopHousekeeping.idleOutputCapacity)
        var owed = [UInt8](repeating: 1, count: LoopHousekeeping.idleOutputCapacity * 2)
        LoopHousekeeping.trim(&owed)
        #expect(owed.count == LoopHousekeeping.idleOutputCapacity * 2, "a buffer holding answers is kept")
    }

    @Test func statsReadTheCountersCatalogAndAdmission() {
        let counters = DaemonCounters(loops: 1, durability: nil)
        counters.record(loop: 0, method: .getStore, status: .ok, nanoseconds: 1000)
        counters.record(loop: 0, method: .getStore, status: .notFound, nanoseconds: 1000)
        counters.connectionsAccepted.add(3, ordering: .relaxed)
        let admission = ConnectionAdmission(limits: PeerConnectionLimits(maximumConnections: 10, maximumPerUID: 5, reserved: 1),
                                            isOperator: { _ in false })
        let s = StatsSnapshot.make(catalog: encodedSample, startedAt: 1_000_000, now: 3_000_000, counters: counters, admission: admission)
        #expect(s.uptimeMilliseconds == 2 && s.connectionsAccepted == 3 && s.connections == 0)
        #expect(s.catalogVersion == catalogVersion && s.catalogStores == UInt64(encodedSample.stores.count))
        #expect(s.methods.first { $0.method == "GetStore" }.map { ($0.requests, $0.errors) } ?? (0, 0) == (2, 1))
        #expect(s.store == "sqlite" && s.serverVersion == ProtocolInfo.serverVersion)
    }
}
