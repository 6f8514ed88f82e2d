@testable import GroserServer
import GroserStorage
import Testing

/// A connection's memo of its last session token's key gives the key the
/// token hashes to, whatever came before it on the connection.
@Suite("session key memo")
struct SessionKeyMemoTests {
    @Test func theSameTokenGivesTheSameKeyAndAnotherTokenItsOwn() {
        var memo = SessionKeyMemo()
        let a = String(repeating: "a1", count: 16), b = String(repeating: "b2", count: 16)
        #expect(memo.key(for: a) == SessionKey(token: a))
        #expect(memo.key(for: a) == SessionKey(token: a))
        #expect(memo.key(for: b) == SessionKey(token: b))
        #expect(memo.key(for: a) == SessionKey(token: a))
        #expect(memo.key(for: "") == SessionKey(token: ""))
    }

    @Test func tokensThatDifferOnlyInTheirBytesAreDifferentTokens() {
        // Equal as Strings (canonically equivalent), different bytes.
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(composed == decomposed)
        var memo = SessionKeyMemo()
        #expect(memo.key(for: composed) == SessionKey(token: composed))
        #expect(memo.key(for: decomposed) == SessionKey(token: decomposed))
        #expect(SessionKey(token: composed) != SessionKey(token: decomposed))
    }
}
