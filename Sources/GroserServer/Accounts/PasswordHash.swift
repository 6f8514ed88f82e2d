import CSodium

/// Argon2id password hashes (libsodium's `crypto_pwhash_str`): the string
/// carries its salt and parameters, so a later groserd may raise them and
/// still check older hashes. Parameters: 2 passes over 19 MiB, one lane
/// (OWASP's Argon2id minimum, about 30 ms here); docs/PROTOCOL.md says so.
public enum PasswordHash {
    public static let operations: UInt64 = 2
    public static let memoryBytes = 19 << 20

    /// The hash of `password`; nil only when libsodium cannot allocate
    /// the memory the hash needs.
    public static func make(_ password: String) -> String? {
        precondition(sodium_init() >= 0, "libsodium could not be initialised")
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let length = UInt64(password.utf8.count)
        let rc = password.withCString { c in
            crypto_pwhash_str_alg(&out, c, length, operations, memoryBytes, crypto_pwhash_ALG_ARGON2ID13)
        }
        guard rc == 0 else { return nil }
        let end = out.firstIndex(of: 0) ?? out.count
        return String(decoding: out[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `password` is the one `hash` was made from. Takes the same
    /// time whether or not it is.
    public static func verify(_ password: String, hash: String) -> Bool {
        precondition(sodium_init() >= 0, "libsodium could not be initialised")
        var stored = Array(hash.utf8CString)
        guard stored.count <= Int(crypto_pwhash_STRBYTES) else { return false }
        stored += [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES) - stored.count)
        let length = UInt64(password.utf8.count)
        return password.withCString { c in crypto_pwhash_str_verify(stored, c, length) == 0 }
    }
}
