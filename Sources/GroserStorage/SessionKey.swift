import CSodium

/// What storage knows of a session token: its BLAKE2b-256 hash, in hex.
///
/// The token itself (128 random bits from the kernel, sent by the client on
/// every request) is never written anywhere; a copy of the database, its WAL
/// or a backup holds only hashes, and a hash does not work as a token.
/// Every table that refers to a session (sessions, carts, idempotency,
/// orders) holds this key.
public struct SessionKey: Sendable, Hashable, CustomStringConvertible {
    /// 64 lower-case hex digits.
    public let hex: String

    /// The key of `token`, as the client sent it (no normalisation: a token
    /// in another case or with extra characters is another token).
    public init(token: String) {
        hex = Self.hash(Array(token.utf8))
    }

    /// A key read back from storage.
    init(storedHex: String) { hex = storedHex }

    /// A key from its 32 bytes, as the customer log stores it.
    init(digest: UnsafeRawBufferPointer) { hex = hexDigits(Array(digest)) }

    /// The key's 32 bytes.
    var digest: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        var high: UInt8? = nil
        for c in hex.utf8 {
            let v: UInt8 = c <= 57 ? c &- 48 : c &- 87
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        return out
    }

    /// Which of `count` shards holds this session: the hash's first byte.
    public func shard(of count: Int) -> Int {
        var it = hex.utf8.makeIterator()
        let a = it.next() ?? 48, b = it.next() ?? 48
        let hi = Int(a <= 57 ? a - 48 : a - 87), lo = Int(b <= 57 ? b - 48 : b - 87)
        return (hi << 4 | lo) % max(1, count)
    }

    public var description: String { "session " + hex.prefix(8) + "…" }

    private static let digestBytes = 32

    static func hash(_ bytes: [UInt8]) -> String {
        Sodium.initialize()
        var digest = [UInt8](repeating: 0, count: digestBytes)
        let rc = digest.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                crypto_generichash(out.baseAddress!, out.count, input.baseAddress, UInt64(input.count), nil, 0)
            }
        }
        precondition(rc == 0, "crypto_generichash failed")
        return hexDigits(digest)
    }

    /// True when the two keys are equal, compared in constant time
    /// (sodium_memcmp), whatever their contents.
    public func matches(_ other: SessionKey) -> Bool {
        let a = Array(hex.utf8), b = Array(other.hex.utf8)
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in sodium_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 } }
    }
}

/// libsodium's one-time initialisation (thread-safe, idempotent).
enum Sodium {
    private static let initialized: Bool = { sodium_init() >= 0 }()
    static func initialize() { precondition(initialized, "libsodium could not be initialised") }
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
