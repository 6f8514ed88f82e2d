import CSodium
import GroserStorage
import GroserSystem

/// Session tokens that groserd recognises without having stored them.
///
/// OpenSession stores nothing: its token carries the time it was made and a
/// MAC under a secret of the data directory (or of the shared PostgreSQL
/// database), so any groserd with that secret can tell a token it issued
/// from a forged one. The session is stored at its first change; until
/// then a token is good for `lifetime` seconds after it was made. As text,
/// 64 lower-case hex digits of:
///
///     created u32 (unix seconds, big-endian)  nonce[12] (kernel random)  mac[16]
///
/// where mac is BLAKE2b-128 keyed with the secret over "groser.v1 session",
/// created and nonce. The token's session key is its hash, as for any
/// token (SessionKey): tokens from logins (128 random bits, 32 hex digits,
/// stored at once) and from older groserd stay what they were.
struct SessionTokens: Sendable {
    /// The secret the MACs are made with (32 bytes).
    let secret: [UInt8]
    /// Seconds an unstored token stays good after it was made.
    let lifetime: Int64

    /// How far ahead of this host's clock a token's time may be (another
    /// groserd sharing the database, its clock a little ahead).
    static let clockSkew: Int64 = 300
    static let secretBytes = 32
    static let tokenBytes = 32
    private static let macBytes = 16
    private static let domain = Array("groser.v1 session".utf8)

    init(secret: [UInt8], lifetime: Int64) {
        precondition(secret.count == Self.secretBytes, "a session secret is \(Self.secretBytes) bytes")
        self.secret = secret
        self.lifetime = lifetime
    }

    /// Tokens under a fresh random secret (tests, the fuzz harness): tokens
    /// of another process are not recognised.
    static func random(lifetime: Int64) -> SessionTokens {
        SessionTokens(secret: (try? KernelRandom.bytes(secretBytes)) ?? [UInt8](repeating: 7, count: secretBytes),
                      lifetime: lifetime)
    }

    /// A new token made at `nowUnix`.
    func mint(nowUnix: Int64) throws(Refusal) -> String {
        let nonce: [UInt8]
        do { nonce = try KernelRandom.bytes(12) } catch {
            throw Refusal(.unavailable, "The kernel gave no random bytes for a session token: \(error).")
        }
        let created = UInt32(clamping: nowUnix)
        var bytes: [UInt8] = [UInt8(created >> 24), UInt8(created >> 16 & 0xff), UInt8(created >> 8 & 0xff), UInt8(created & 0xff)]
        bytes += nonce
        bytes += mac(bytes)
        return Hex.encode(bytes)
    }

    /// When `token` was made, if it is one of these tokens (its MAC good)
    /// and still good at `nowUnix`; nil for any other text. Only the exact
    /// form `mint` writes is accepted (lower-case hex, 64 digits): any other
    /// spelling hashes to another session key.
    func createdAt(of token: String, nowUnix: Int64) -> Int64? {
        guard token.utf8.count == Self.tokenBytes * 2, let bytes = Hex.decode(token.utf8, upperCase: false) else { return nil }
        let signed = Array(bytes[..<(Self.tokenBytes - Self.macBytes)])
        let expected = mac(signed)
        let good = bytes.withUnsafeBufferPointer { b in
            expected.withUnsafeBufferPointer { e in
                sodium_memcmp(b.baseAddress! + signed.count, e.baseAddress!, Self.macBytes) == 0
            }
        }
        guard good else { return nil }
        let created = Int64(bytes[0]) << 24 | Int64(bytes[1]) << 16 | Int64(bytes[2]) << 8 | Int64(bytes[3])
        guard created <= nowUnix + Self.clockSkew, nowUnix - created <= lifetime else { return nil }
        return created
    }

    /// True when a stored session made at `createdAtUnix` may have a token
    /// that is still good unstored: removing such a session would let its
    /// token open it again, empty (a merged guest leaves a mark instead).
    func mayStillBeGood(createdAtUnix: Int64, nowUnix: Int64) -> Bool {
        nowUnix - createdAtUnix <= lifetime + Self.clockSkew
    }

    private func mac(_ signed: [UInt8]) -> [UInt8] {
        Sodium.initialize()
        var out = [UInt8](repeating: 0, count: Self.macBytes)
        let input = Self.domain + signed
        let rc = out.withUnsafeMutableBufferPointer { o in
            input.withUnsafeBufferPointer { i in
                secret.withUnsafeBufferPointer { k in
                    crypto_generichash(o.baseAddress!, o.count, i.baseAddress, UInt64(i.count), k.baseAddress, k.count)
                }
            }
        }
        precondition(rc == 0, "crypto_generichash failed")
        return out
    }

    /// The secret kept in `directory` (the customer log's), made on first
    /// use: 32 random bytes in a 0600 file `session-secret`. Losing it ends
    /// every session not yet stored; stored sessions do not depend on it.
    static func secret(inDirectory directory: String) throws(StorageError) -> [UInt8] {
        let path = directory + "/session-secret"
        do {
            if let stored = try Files.read(path) {
                guard stored.count == secretBytes else {
                    throw StorageError("\(path) should hold \(secretBytes) bytes, not \(stored.count); remove it to make a new one (sessions not yet stored then end)")
                }
                if try Files.mode(path) & 0o077 != 0 { try Files.changeMode(path, to: 0o600) }
                return stored
            }
            let made = try KernelRandom.bytes(secretBytes)
            try Files.writeAtomically(path, made, mode: 0o600)
            return made
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError("cannot read or make the session secret \(path): \(error)")
        }
    }
}
