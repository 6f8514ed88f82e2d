@testable import GroserServer
@testable import GroserSystem
import GroserWire
import Testing

/// The connection slots' rule: the total, the per-uid maximum and the
/// slots kept for operators (PeerConnectionLimits, ConnectionAdmission).
@Suite struct PeerConnectionLimitsTests {
    let limits = PeerConnectionLimits(maximumConnections: 100, maximumPerUID: 25, reserved: 4)

    @Test func aUidUnderItsMaximumInTheOpenSlotsIsAdmittedWithoutAskingWhoItIs() {
        var asked = false
        #expect(limits.refusal(total: 96, uidCount: 25) { asked = true; return false } == nil)
        #expect(!asked, "the operator check reads the group database: only a refusal asks it")
    }

    @Test func aUidPastItsMaximumIsRefusedUnlessAnOperator() {
        #expect(limits.refusal(total: 50, uidCount: 26) { false } == .perUID)
        #expect(limits.refusal(total: 50, uidCount: 26) { true } == nil)
    }

    @Test func theReservedSlotsAreForOperatorsOnly() {
        #expect(limits.refusal(total: 97, uidCount: 1) { false } == .reserved)
        #expect(limits.refusal(total: 97, uidCount: 1) { true } == nil)
        #expect(limits.refusal(total: 100, uidCount: 1) { true } == nil)
    }

    @Test func nobodyPassesTheTotal() {
        #expect(limits.refusal(total: 101, uidCount: 1) { true } == .total)
    }

    @Test func theSentenceNamesTheCause() {
        #expect(limits.status(.perUID, uid: 1001, open: 50)
            == Status(.resourceExhausted, "uid 1001 has 25 connections to groserd, its maximum (--max-connections-per-uid); close one first."))
        let reserved = limits.status(.reserved, uid: 1001, open: 96)
        #expect(reserved.code == .unavailable && reserved.message.contains("its last 4 of 100 are kept for its operators"))
        #expect(limits.status(.total, uid: nil, open: 100).message == "groserd has 100 connections, its maximum; try again later.")
    }

    @Test func theDefaultsLeaveRoomForOthersAndOperators() {
        let config = ServerConfig(socketPath: "/tmp/x.sock")
        let defaults = PeerConnectionLimits(config)
        #expect(defaults.maximumConnections == 4096 && defaults.maximumPerUID == 1024 && defaults.reserved == 64)
        #expect(PeerConnectionLimits.defaultReserve(maximumConnections: 64) == 4)
        #expect(config.idleTimeoutSeconds == 300)
    }

    @Test func refusalsAreLoggedOnceASecondWithTheCountOfThoseNot() {
        var throttle = RefusalLogThrottle()
        let second: UInt64 = 1_000_000_000
        #expect(throttle.take(now: 5 * second) == 0)
        #expect(throttle.take(now: 5 * second + 1) == nil)
        #expect(throttle.take(now: 6 * second - 1) == nil)
        #expect(throttle.take(now: 6 * second) == 2)
        #expect(throttle.take(now: 9 * second) == 0)
    }

    @Test func admissionCountsPerUidAndForgetsAUidWithNoConnection() {
        let admission = ConnectionAdmission(limits: PeerConnectionLimits(maximumConnections: 8, maximumPerUID: 3, reserved: 2)) {
            $0.uid == 0
        }
        let attacker = PeerCredentials(pid: 1, uid: 1001, gid: 1001)
        let other = PeerCredentials(pid: 2, uid: 1002, gid: 1002)
        let root = PeerCredentials(pid: 3, uid: 0, gid: 0)
        for _ in 0..<3 { #expect(admission.admit(attacker) == nil) }
        #expect(admission.admit(attacker)?.code == .resourceExhausted)
        for _ in 0..<3 { #expect(admission.admit(other) == nil) }
        // Six open: the last two of eight are the operators'.
        #expect(admission.admit(PeerCredentials(pid: 4, uid: 1003, gid: 1003))?.code == .unavailable)
        #expect(admission.admit(root) == nil)
        #expect(admission.admit(root) == nil)
        #expect(admission.admit(root)?.message.contains("its maximum; try again later") == true)
        #expect(admission.openConnections == 8)
        for _ in 0..<3 { admission.release(attacker) }
        #expect(admission.uidsHoldingConnections == 2)
        #expect(admission.admit(attacker) == nil, "a closed connection's slot is given back")
        var stats = ServerStats()
        admission.report(into: &stats)
        #expect(stats.connectionsRefused == 3 && stats.connectionsRefusedPerUID == 1 && stats.connectionsRefusedReserved == 1)
    }
}
