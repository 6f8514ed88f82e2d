@testable import GroserServer
import GroserStorage
import GroserSystem
import Testing

/// Tokens recognised without being stored, and the per-uid OpenSession limit.
@Suite("session tokens and the OpenSession limit")
struct SessionTokensTests {
    let tokens = SessionTokens(secret: Array(repeating: 1, count: 32), lifetime: 6 * 3600)
    let t0: Int64 = 1_780_000_000

    @Test func aMintedTokenIsRecognisedUntilItsLifetimeEnds() throws {
        let token = try tokens.mint(nowUnix: t0)
        #expect(token.count == 64)
        #expect(tokens.createdAt(of: token, nowUnix: t0) == t0)
        #expect(tokens.createdAt(of: token, nowUnix: t0 + 6 * 3600) == t0)
        #expect(tokens.createdAt(of: token, nowUnix: t0 + 6 * 3600 + 1) == nil, "expired")
        #expect(tokens.createdAt(of: token, nowUnix: t0 - SessionTokens.clockSkew) == t0, "a host a little behind")
        #expect(tokens.createdAt(of: token, nowUnix: t0 - SessionTokens.clockSkew - 1) == nil, "from the future")
        #expect(try tokens.mint(nowUnix: t0) != token)
    }

    @Test func anotherSecretOrAChangedDigitIsNoToken() throws {
        let token = try tokens.mint(nowUnix: t0)
        let other = SessionTokens(secret: Array(repeating: 2, count: 32), lifetime: 6 * 3600)
        #expect(other.createdAt(of: token, nowUnix: t0) == nil)
        var bytes = Array(token.utf8)
        for i in [0, 10, 40, 63] {
            let saved = bytes[i]
            bytes[i] = saved == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            #expect(tokens.createdAt(of: String(decoding: bytes, as: UTF8.self), nowUnix: t0) == nil, "digit \(i)")
            bytes[i] = saved
        }
        for text in ["", token.uppercased(), token + "0", String(token.dropLast()), String(repeating: "0", count: 32),
                     String(repeating: "g", count: 64)] {
            #expect(tokens.createdAt(of: text, nowUnix: t0) == nil, "\(text)")
        }
    }

    @Test func aStoredSessionMayStillHaveAGoodTokenOnlyWithinTheLifetime() {
        #expect(tokens.mayStillBeGood(createdAtUnix: t0, nowUnix: t0 + 3600))
        #expect(!tokens.mayStillBeGood(createdAtUnix: t0, nowUnix: t0 + 7 * 3600))
    }

    @Test func theLimiterAdmitsTheBurstThenTheRate() {
        var limiter = OpenSessionLimiter(SessionLimits(opensPerSecond: 10, openBurst: 3))
        func admit(_ uid: UInt32, _ t: UInt64) -> Bool { limiter.admit(uid: uid, nowNanoseconds: t) }
        let s: UInt64 = 1_000_000_000
        #expect((0..<3).allSatisfy { _ in admit(1000, 5 * s) })
        #expect(!admit(1000, 5 * s), "the burst is spent")
        #expect(admit(1001, 5 * s), "another uid has its own bucket")
        #expect(admit(1000, 5 * s + s / 10), "one more after a tenth of a second")
        #expect(!admit(1000, 5 * s + s / 10))
        #expect((0..<3).allSatisfy { _ in admit(1000, 100 * s) }, "refilled, to the burst")
        #expect(!admit(1000, 100 * s))
        #expect(admit(1000, 50 * s) == false, "a clock going back gives nothing")
    }

    @Test func exemptUidsAreNotLimited() {
        var limiter = OpenSessionLimiter(SessionLimits(opensPerSecond: 1, openBurst: 1), exempt: [0, 990])
        func admit(_ uid: UInt32?, _ t: UInt64) -> Bool { limiter.admit(uid: uid, nowNanoseconds: t) }
        #expect((0..<100).allSatisfy { _ in admit(0, 0) && admit(990, 0) })
        #expect(admit(nil, 0) && !admit(nil, 0), "no credentials: limited as one uid")
        #expect(limiter.peers == 1)
    }

    @Test func noRateMeansNoLimit() {
        var limiter = OpenSessionLimiter(SessionLimits(opensPerSecond: 0, openBurst: 1))
        func admit(_ uid: UInt32, _ t: UInt64) -> Bool { limiter.admit(uid: uid, nowNanoseconds: t) }
        #expect((0..<1000).allSatisfy { _ in admit(7, 0) })
        #expect(limiter.peers == 0)
    }

    @Test func theTableIsBoundedAndForgetsRefilledUids() {
        var limiter = OpenSessionLimiter(SessionLimits(opensPerSecond: 1, openBurst: 2), maximumPeers: 3)
        func admit(_ uid: UInt32, _ t: UInt64) -> Bool { limiter.admit(uid: uid, nowNanoseconds: t) }
        let s: UInt64 = 1_000_000_000
        for uid: UInt32 in 1...3 { #expect(admit(uid, s)) }
        #expect(!admit(4, s), "full, and every uid is still counting")
        #expect(admit(4, 10 * s), "once they refilled, they are forgotten")
        #expect(limiter.peers <= 3)
    }

    @Test func aUidsShareOfStoredSessionsIsAnEighthAtOnceAndRefillsOverTheLifetime() {
        let clock = Locked<UInt64>(1_000_000_000)
        let day: UInt64 = 86_400 * 1_000_000_000
        // 800 sessions, a lifetime of 8 days: 100 at once, 100 more over 8 days.
        let share = StoredSessionShare(maximumStored: 800, idleLifetimeSeconds: 8 * 86_400, exempt: [0],
                                       monotonic: { clock.withLock { $0 } })
        #expect(share.perUID == 100)
        #expect((0..<100).allSatisfy { _ in share.admit(1000) })
        #expect(!share.admit(1000), "the share is spent")
        #expect(share.admit(1001), "another uid has its own")
        #expect((0..<1000).allSatisfy { _ in share.admit(0) }, "root is not limited")
        share.refund(1000)
        #expect(share.admit(1000) && !share.admit(1000), "a refund gives one back")
        clock.withLock { $0 += day }
        #expect((0..<12).allSatisfy { _ in share.admit(1000) } && !share.admit(1000), "a day refills an eighth of the share")
        #expect(share.refusal.status.message.contains("--max-sessions"))
    }

    @Test func anEndedGuestSurvivesTheLogsEncoding() {
        let key = SessionKey(token: "guest")
        var state = CustomerState()
        state.apply(.session(key, createdAtUnix: 5))
        state.apply(.ended(key, createdAtUnix: 5))
        #expect(state.sessions[key]?.ended == true)
        var again = CustomerState()
        state.forEachRecord { again.apply($0) }
        #expect(again.sessions[key]?.ended == true)
        #expect(again.sessions[key]?.carts.isEmpty == true)
    }
}
