import CSodium
import GroserSystem
import GroserWire

/// ListProducts' page tokens (AIP-158): opaque to clients, and signed, so a
/// token cannot be forged or moved to another store or shelf. A token holds
/// the store's layout version and the position of the next product; its MAC
/// (keyed BLAKE2b-128, a key drawn at start) binds them to the store and
/// shelf asked for. Tokens of an earlier run of groserd are refused, like
/// forged ones: paging starts again.
enum PageToken {
    static let defaultPageSize = 100
    static let maximumPageSize = 1000

    private static let prefix = "p1."
    private static let macBytes = 16
    private static let key: [UInt8] = {
        precondition(sodium_init() >= 0, "libsodium could not be initialised")
        // The kernel's getrandom does not fail once the pool is ready; if it
        // did, a fixed key only makes tokens guessable, not the daemon unsafe.
        return (try? KernelRandom.bytes(Int(crypto_generichash_KEYBYTES))) ?? [UInt8](repeating: 0x5a, count: 32)
    }()

    enum Reading: Equatable {
        case valid(layoutVersion: UInt64, offset: Int)
        case forged
    }

    static func make(storeUID: String, shelfUID: String, layoutVersion: UInt64, offset: Int) -> String {
        var payload: [UInt8] = []
        append(layoutVersion, bytes: 8, to: &payload)
        append(UInt64(offset), bytes: 4, to: &payload)
        payload += mac(payload, storeUID: storeUID, shelfUID: shelfUID)
        return prefix + Base64.encode(payload, url: true)
    }

    static func read(_ token: String, storeUID: String, shelfUID: String) -> Reading {
        guard token.hasPrefix(prefix), let payload = Base64.decode(String(token.dropFirst(prefix.count)), url: true),
              payload.count == 12 + macBytes else { return .forged }
        let body = Array(payload[0..<12])
        let expected = mac(body, storeUID: storeUID, shelfUID: shelfUID)
        let given = Array(payload[12...])
        let equal = expected.withUnsafeBytes { a in given.withUnsafeBytes { b in sodium_memcmp(a.baseAddress, b.baseAddress, macBytes) == 0 } }
        guard equal else { return .forged }
        var layout: UInt64 = 0
        for b in body[0..<8] { layout = layout << 8 | UInt64(b) }
        var offset: UInt64 = 0
        for b in body[8..<12] { offset = offset << 8 | UInt64(b) }
        return .valid(layoutVersion: layout, offset: Int(offset))
    }

    private static func mac(_ body: [UInt8], storeUID: String, shelfUID: String) -> [UInt8] {
        let message = body + Array(storeUID.utf8) + [0] + Array(shelfUID.utf8)
        var out = [UInt8](repeating: 0, count: macBytes)
        _ = out.withUnsafeMutableBufferPointer { o in
            message.withUnsafeBufferPointer { m in
                key.withUnsafeBufferPointer { k in
                    crypto_generichash(o.baseAddress!, macBytes, m.baseAddress, UInt64(m.count), k.baseAddress, k.count)
                }
            }
        }
        return out
    }

    private static func append(_ value: UInt64, bytes: Int, to out: inout [UInt8]) {
        for i in (0..<bytes).reversed() { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }
}
