import Glibc
import GroserStorage

/// The key of the session token a connection sent last. A client sends the
/// same token request after request, and hashing it (BLAKE2b) cost about
/// 1,700 of a cart-add's 38,000 instructions. The tokens are compared byte
/// for byte, not as Strings: String equality is canonical equivalence, and
/// two tokens spelled with different bytes are different tokens.
struct SessionKeyMemo {
    private var token = ""
    private var key: SessionKey?

    init() {}

    /// The key of `token`, hashed only when it differs from the last one.
    mutating func key(for token: String) -> SessionKey {
        if let key, Self.sameBytes(token, self.token) { return key }
        let made = SessionKey(token: token)
        self.token = token
        key = made
        return made
    }

    private static func sameBytes(_ a: String, _ b: String) -> Bool {
        let same = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
        if case let same?? = same { return same }
        return a.utf8.elementsEqual(b.utf8)
    }
}
