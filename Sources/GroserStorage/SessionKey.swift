import CSodium

/// What storage knows of a session token: its BLAKE2b-256 hash, in hex.
///
/// The token itself (128 random bits from the kernel, sent by the client on
/// every request) is never written anywhere; a copy of the database, its WAL
/// or a backup holds only hashes, and a hash does not work as a token.
/// Every table that refers to a session (sessions, carts, idempotency,
/// orders) holds this key.
public struct SessionKey: Sendable, Hashable, CustomStringConvertible {
    /// The hash's 32 bytes, in four words as they lie in memory: hashing and
    /// comparing a key is four words, not a 64-character string, and making
    /// one allocates nothing (both showed in the cart path's profile).
    @usableFromInline var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// The key of `token`, as the client sent it (no normalisation: a token
    /// in another case or with extra characters is another token).
    public init(token: String) {
        Sodium.initialize()
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let rc = withUnsafeMutableBytes(of: &digest) { out in
            Array(token.utf8).withUnsafeBufferPointer { input in
                crypto_generichash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
                                   input.baseAddress, UInt64(input.count), nil, 0)
            }
        }
        precondition(rc == 0, "crypto_generichash failed")
        words = digest
    }

    /// The key of the account with this (normalised) email: BLAKE2b-256
    /// keyed with a fixed domain string, so that no token a client sends
    /// hashes to it (a token's key is the unkeyed hash).
    public init(accountEmail email: String) {
        Sodium.initialize()
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let domain = Array("groser.v1 account".utf8)
        let rc = withUnsafeMutableBytes(of: &digest) { out in
            Array(email.utf8).withUnsafeBufferPointer { input in
                domain.withUnsafeBufferPointer { key in
                    crypto_generichash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
                                       input.baseAddress, UInt64(input.count), key.baseAddress, key.count)
                }
            }
        }
        precondition(rc == 0, "crypto_generichash failed")
        words = digest
    }

    /// A key read back from storage (64 hex digits).
    init(storedHex: String) {
        var bytes = [UInt8](repeating: 0, count: Self.digestBytes)
        var high: UInt8? = nil
        var i = 0
        for c in storedHex.utf8 where i < Self.digestBytes {
            let v: UInt8 = c <= 57 ? c &- 48 : (c | 0x20) &- 87
            if let h = high { bytes[i] = h << 4 | v; i += 1; high = nil } else { high = v }
        }
        self.init(digest: bytes)
    }

    /// A key from its 32 bytes, as the customer log stores it.
    init(digest: UnsafeRawBufferPointer) {
        precondition(digest.count == Self.digestBytes)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: digest) }
    }

    init(digest: [UInt8]) { self = digest.withUnsafeBytes { SessionKey(digest: $0) } }

    public static func == (a: SessionKey, b: SessionKey) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    /// The hash's first word (SessionTable's buckets).
    @inlinable var firstWord: UInt64 { words.0 }

    public func hash(into hasher: inout Hasher) {
        // The words are a cryptographic hash already; one is spread enough
        // for a table, and Hasher's seed keeps it unpredictable.
        hasher.combine(words.0)
    }

    /// The key's 32 bytes.
    var digest: [UInt8] { withUnsafeBytes(of: words) { Array($0) } }

    /// `body` over the key's 32 bytes.
    func withDigest<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(of: words, body)
    }

    /// 64 lower-case hex digits: how SQLite's tables hold the key.
    public var hex: String { hexDigits(digest) }

    /// Which of `count` shards holds this session: the hash's first byte.
    public func shard(of count: Int) -> Int {
        let first = withUnsafeBytes(of: words) { $0[0] }
        return Int(first) % max(1, count)
    }

    public var description: String { "session " + hex.prefix(8) + "…" }

    private static let digestBytes = 32

    /// True when the two keys are equal, compared in constant time
    /// (sodium_memcmp), whatever their contents.
    public func matches(_ other: SessionKey) -> Bool {
        withUnsafeBytes(of: words) { x in
            withUnsafeBytes(of: other.words) { y in sodium_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
        }
    }
}

/// libsodium's one-time initialisation (thread-safe, idempotent).
public enum Sodium {
    private static let initialized: Bool = { sodium_init() >= 0 }()
    public static func initialize() { precondition(initialized, "libsodium could not be initialised") }
}

/// Bytes as hex text, and back.
public enum Hex {
    /// Lower-case hex digits, two a byte.
    public static func encode(_ bytes: [UInt8]) -> String { hexDigits(bytes) }

    /// The bytes of hex text (two digits a byte); nil for anything else.
    /// Upper-case digits count only when `upperCase` is true.
    public static func decode<S: Collection>(_ utf8: S, upperCase: Bool = true) -> [UInt8]? where S.Element == UInt8 {
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for c in utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where upperCase: v = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        return out
    }
}

func hexDigits(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
