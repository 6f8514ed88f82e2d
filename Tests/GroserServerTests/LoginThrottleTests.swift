@testable import GroserServer
import Testing

/// The login throttle, the registration rate and the hashing queue's turns,
/// as pure values with the clock passed in.
@Suite("login throttle and hashing queue")
struct LoginThrottleTests {
    typealias Attempt = LoginThrottle.Attempt

    @Test func failuresWaitDoublingAndASuccessClearsThePair() {
        var t = LoginThrottle(.init(perAccount: 3, perPeer: 0))
        let a = Attempt.login(account: "a", peer: 1, session: "")
        for i in 0..<2 {
            #expect(t.reserve(a, nowMillis: UInt64(i)) == nil)
            t.finish(a, failed: true, nowMillis: UInt64(i))
        }
        #expect(t.reserve(a, nowMillis: 10) == nil)
        t.finish(a, failed: true, nowMillis: 10)
        #expect(t.reserve(a, nowMillis: 10) == 1000)
        #expect(t.reserve(a, nowMillis: 1010) == nil, "one try once the wait is over")
        t.finish(a, failed: true, nowMillis: 1010)
        #expect(t.reserve(a, nowMillis: 1010) == 2000)
        #expect(t.reserve(.login(account: "b", peer: 1, session: ""), nowMillis: 1010) == nil, "other accounts are free")
        #expect(t.reserve(a, nowMillis: 3010) == nil)
        t.finish(a, failed: false, nowMillis: 3011)
        #expect(t.reserve(a, nowMillis: 3012) == nil, "a success clears the pair")
    }

    @Test func attemptsInFlightCountSoPipelinedOnesCannotOverrunTheLimit() {
        var t = LoginThrottle(.init(perAccount: 5, perPeer: 50))
        let a = Attempt.login(account: "victim", peer: 7, session: "")
        let admitted = (0..<40).filter { _ in t.reserve(a, nowMillis: 0) == nil }.count
        #expect(admitted == 5, "exactly the limit is checked")
        for _ in 0..<5 { t.finish(a, failed: true, nowMillis: 1) }
        #expect(t.reserve(a, nowMillis: 1) == 1000)
        // The uid's limit counts in-flight attempts over accounts too.
        let peer = (0..<100).filter { t.reserve(.login(account: "x\($0)", peer: 7, session: ""), nowMillis: 2) == nil }.count
        #expect(peer == 45, "50 over all accounts, 5 of them failed above")
    }

    @Test func anotherUidsOrSessionsFailuresDoNotLockTheOwnerOut() {
        var t = LoginThrottle(.init(perAccount: 5, perPeer: 1000, accountWide: 20))
        let attacker = Attempt.login(account: "victim", peer: 65534, session: "")
        for i in 0..<200 {
            let now = UInt64(i) * 1000
            if t.reserve(attacker, nowMillis: now) == nil { t.finish(attacker, failed: true, nowMillis: now) }
        }
        let owner = Attempt.login(account: "victim", peer: 1000, session: "")
        #expect(t.reserve(owner, nowMillis: 200 * 1000) == nil, "another uid")
        // One web front end's uid: sessions are told apart.
        let frontEnd = Attempt.login(account: "v2", peer: 33, session: "attacker-session")
        for _ in 0..<5 { _ = t.reserve(frontEnd, nowMillis: 0); t.finish(frontEnd, failed: true, nowMillis: 0) }
        #expect(t.reserve(frontEnd, nowMillis: 1) != nil)
        #expect(t.reserve(.login(account: "v2", peer: 33, session: "owner-session"), nowMillis: 1) == nil)
    }

    @Test func theAccountWideBackstopHoldsBackOnlyPairsThatFailedThemselves() {
        var t = LoginThrottle(.init(perAccount: 5, perPeer: 0, accountWide: 10))
        for s in 0..<10 {
            let a = Attempt.login(account: "v", peer: 9, session: "s\(s)")
            #expect(t.reserve(a, nowMillis: 0) == nil)
            t.finish(a, failed: true, nowMillis: 0)
        }
        #expect(t.reserve(.login(account: "v", peer: 9, session: "s0"), nowMillis: 1) != nil, "a pair that failed waits")
        #expect(t.reserve(.login(account: "v", peer: 9, session: "fresh"), nowMillis: 1) == nil, "one that never failed does not")
    }

    @Test func thePeerLimitCountsOverAccountsAndMemoryIsBounded() {
        var t = LoginThrottle(.init(perAccount: 100, perPeer: 2, capacity: 10))
        for account in ["a", "b"] {
            let a = Attempt.login(account: account, peer: 7, session: "")
            _ = t.reserve(a, nowMillis: 0)
            t.finish(a, failed: true, nowMillis: 0)
        }
        #expect(t.reserve(.login(account: "c", peer: 7, session: ""), nowMillis: 0) ?? 0 > 0)
        #expect(t.reserve(.login(account: "c", peer: 8, session: ""), nowMillis: 0) == nil)
        for i in 0..<100 {
            let a = Attempt.login(account: "x\(i)", peer: nil, session: "")
            _ = t.reserve(a, nowMillis: UInt64(i))
            t.finish(a, failed: true, nowMillis: UInt64(i))
        }
        #expect(t.entryCount <= 30)
    }

    @Test func registrationsTakeTokensPerUid() {
        var r = RegistrationRate(perMinute: 20)
        let taken = (0..<30).filter { _ in r.take(peer: 5, nowMillis: 0) == nil }.count
        #expect(taken == 20)
        #expect(r.take(peer: 5, nowMillis: 0) == 3001, "one more in 3 s")
        #expect(r.take(peer: 6, nowMillis: 0) == nil, "another uid has its own")
        #expect(r.take(peer: 5, nowMillis: 3000) == nil)
        #expect(r.take(peer: 5, nowMillis: 3000) != nil)
        r.giveBack(peer: 5, nowMillis: 3000)
        #expect(r.take(peer: 5, nowMillis: 3000) == nil, "given back")
        var none = RegistrationRate(perMinute: 0)
        #expect((0..<100).allSatisfy { _ in none.take(peer: 1, nowMillis: 0) == nil })
    }

    @Test func aRefusedRegistrationTakesNoTokenAndATakenEmailIsAFailure() {
        var gate = AccountAdmission(.init(perAccount: 2, perPeer: 50, registrationsPerMinute: 3))
        for _ in 0..<2 {
            guard case .success(let ticket) = gate.admit(.registration(email: "taken@x.co"), peer: 4, nowMillis: 0) else {
                Issue.record("refused")
                return
            }
            gate.finish(ticket, .failed, nowMillis: 0)
        }
        guard case .failure(let refusal) = gate.admit(.registration(email: "taken@x.co"), peer: 4, nowMillis: 0) else {
            Issue.record("a third taken email was admitted")
            return
        }
        #expect(refusal.status.code == .resourceExhausted && refusal.status.message.contains("try again in 1 s"), "\(refusal)")
        guard case .success = gate.admit(.registration(email: "new@x.co"), peer: 4, nowMillis: 0) else {
            Issue.record("the uid's last registration of the minute was taken by a refusal")
            return
        }
    }

    @Test func theQueueServesUidsInTurnWithinItsBounds() {
        var q = FairQueue<String>(perPeer: 3, total: 5)
        for i in 0..<4 { _ = q.push("a\(i)", peer: 1) }
        #expect(q.waiting(for: 1) == 3)
        #expect(q.push("a4", peer: 1) == .peerFull)
        #expect(q.push("b0", peer: 2) == nil)
        #expect(q.push("c0", peer: nil) == nil)
        #expect(q.push("b1", peer: 2) == .full)
        var order: [String] = []
        while let next = q.pop() { order.append(next) }
        #expect(order == ["a0", "b0", "c0", "a1", "a2"], "one of each uid in turn")
        #expect(q.count == 0)
    }
}
