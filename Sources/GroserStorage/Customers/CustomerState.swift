import GroserWire

/// A cart as the customer log keeps it.
public struct StoredCart: Sendable, Hashable {
    public var version: UInt64
    /// In the order products were first added; one line per product.
    public var lines: [CartLineRecord]
    public init(version: UInt64 = 0, lines: [CartLineRecord] = []) {
        self.version = version
        self.lines = lines
    }
}

/// A cart change that touched one line and nothing else of the cart: a
/// line's new quantity or seen price in place, a line added at the end, or
/// a line removed (`quantity` 0). Most cart mutations are one; the log keeps
/// it (kind 10) instead of the whole cart, so a change costs the log one
/// line whatever the cart holds (a 20-line cart's record was 700 bytes).
public struct CartLineChange: Sendable, Hashable {
    /// The cart's version after the change.
    public var version: UInt64
    public var productUID: String
    /// The line's quantity after the change; 0: the line was removed.
    public var quantity: UInt32
    public var seenPriceMinorUnits: Int64
    // Made by `between` and the log's reader only: the memberwise init is
    // the module's.

    /// The change that turns `old` (nil: no cart yet) into `new`, when
    /// `StoredCart.apply` of it gives exactly `new` and `new`'s version
    /// follows `old`'s; nil for any other change (several lines, only the
    /// version), which is logged as the whole cart. Compares the lines once;
    /// looks nothing up.
    public static func between(_ old: StoredCart?, _ new: StoredCart) -> CartLineChange? {
        // A line change follows the version it was made on (replay checks it).
        guard new.version == (old?.version ?? 0) &+ 1 else { return nil }
        let before = old?.lines ?? []
        let after = new.lines
        // The first line that differs (or the end of the shorter).
        var i = 0
        while i < before.count && i < after.count && before[i] == after[i] { i += 1 }
        let change: CartLineChange
        switch after.count - before.count {
        case 0:
            // One line changed in place, the same product, the rest equal.
            guard i < after.count, before[i].productUID == after[i].productUID, after[i].quantity > 0,
                  before[(i + 1)...] == after[(i + 1)...],
                  !before[..<i].contains(where: { $0.productUID == after[i].productUID }) else { return nil }
            change = CartLineChange(version: new.version, line: after[i])
        case 1:
            // One line added at the end, of a product the cart did not hold.
            guard i == before.count, after[i].quantity > 0,
                  !before.contains(where: { $0.productUID == after[i].productUID }) else { return nil }
            change = CartLineChange(version: new.version, line: after[i])
        case -1:
            // One line removed, the rest equal and in order.
            let gone = before[i].productUID
            guard before[(i + 1)...] == after[i...], !after.contains(where: { $0.productUID == gone }) else { return nil }
            change = CartLineChange(version: new.version, productUID: gone, quantity: 0, seenPriceMinorUnits: 0)
        default:
            return nil
        }
        // (Every debug build, so every test's cart change, checks the claim.)
        assert({ var c = old ?? StoredCart(); c.apply(change); return c == new }(), "CartLineChange.between: \(change) does not turn \(String(describing: old)) into \(new)")
        return change
    }
}

extension CartLineChange {
    init(version: UInt64, line: CartLineRecord) {
        self.init(version: version, productUID: line.productUID, quantity: line.quantity,
                  seenPriceMinorUnits: line.seenPriceMinorUnits)
    }
}

extension StoredCart {
    /// Takes `change`'s version; sets its product's line in place, or adds
    /// it at the end, or (`quantity` 0) removes it.
    public mutating func apply(_ change: CartLineChange) {
        version = change.version
        if let i = lines.firstIndex(where: { $0.productUID == change.productUID }) {
            if change.quantity == 0 {
                lines.remove(at: i)
            } else {
                lines[i].quantity = change.quantity
                lines[i].seenPriceMinorUnits = change.seenPriceMinorUnits
            }
        } else if change.quantity > 0 {
            lines.append(CartLineRecord(productUID: change.productUID, quantity: change.quantity,
                                        seenPriceMinorUnits: change.seenPriceMinorUnits))
        }
    }
}

/// The answer of an idempotent request, and when it was given (it expires).
public struct StoredAnswer: Sendable, Hashable {
    public var answer: IdempotentAnswer
    public var atUnix: Int64
    public init(_ answer: IdempotentAnswer, atUnix: Int64) {
        self.answer = answer
        self.atUnix = atUnix
    }
}

/// An account as the customer log keeps it. The password is kept only as
/// its Argon2id hash (libsodium's `crypto_pwhash_str` string).
public struct AccountRecord: Sendable, Hashable {
    /// Trimmed and lower-cased.
    public var email: String
    public var name: String
    public var passwordHash: String
    public var createdAtUnix: Int64
    public init(email: String, name: String, passwordHash: String, createdAtUnix: Int64) {
        self.email = email
        self.name = name
        self.passwordHash = passwordHash
        self.createdAtUnix = createdAtUnix
    }
}

/// One change of customer state, as the log stores it. Every record states
/// the whole new value of what it names (a cart record holds the whole cart,
/// a line change the line's), so applying a record twice in a row gives the
/// same state. Records are applied once each, in order: a snapshot is
/// followed only by the segments after it (recovery removes those it holds).
public enum CustomerRecord: Sendable, Hashable {
    case session(SessionKey, createdAtUnix: Int64)
    case cart(SessionKey, storeUID: String, StoredCart, atUnix: Int64)
    /// One line of a cart changed (`CartLineChange`); written instead of
    /// `cart` when that is all a change did.
    case cartLine(SessionKey, storeUID: String, CartLineChange, atUnix: Int64)
    case answer(SessionKey, key: String, StoredAnswer)
    case sessionRemoved(SessionKey)
    /// A snapshot's note of a session's last activity (reads leave no record).
    case active(SessionKey, atUnix: Int64)
    /// An account, under the key derived from its email.
    case account(SessionKey, AccountRecord)
    /// A session logged in to the account entry `owner`.
    case boundSession(SessionKey, owner: SessionKey, createdAtUnix: Int64)
    /// A guest session sealed for a merge into the account entry `owner`.
    case sealed(SessionKey, owner: SessionKey)
    /// The account entry `owner` merged the guest session `guest`; the
    /// answer is the login's, without its token.
    case absorbed(owner: SessionKey, guest: SessionKey, StoredAnswer)
    /// The guest session ended with a login's merge (`SessionState.ended`).
    case ended(SessionKey, createdAtUnix: Int64)

    /// The session (or account entry) the record belongs to: the shard it
    /// lives on, the row a shared store writes.
    public var key: SessionKey {
        switch self {
        case .session(let k, _), .cart(let k, _, _, _), .cartLine(let k, _, _, _), .answer(let k, _, _), .sessionRemoved(let k),
             .active(let k, _), .account(let k, _), .boundSession(let k, _, _), .sealed(let k, _), .absorbed(let k, _, _),
             .ended(let k, _): return k
        }
    }
}

/// Every session of one shard: what the log's records add up to.
public struct CustomerState: Sendable {
    public var sessions = SessionTable()
    /// Line changes not applied because they did not follow their cart's
    /// version: 0 in a sound log. Only a log cut by `groserd --repair` in
    /// its middle has them (a record lost before them); the cart then stays
    /// as it last was, a state it really had, not one made of lines applied
    /// to an older cart, until a whole-cart record comes.
    public private(set) var skippedLineChanges = 0
    public init() {}

    public mutating func apply(_ record: CustomerRecord) {
        switch record {
        case .session(let key, let at):
            if sessions[key] == nil { sessions[key] = SessionState(createdAtUnix: at) }
        case .cart(let key, let store, let cart, let at):
            sessions[key, default: SessionState(createdAtUnix: at)].carts[store] = cart
            touch(key, at)
        case .cartLine(let key, let store, let change, let at):
            guard (sessions[key]?.carts[store]?.version ?? 0) &+ 1 == change.version else {
                skippedLineChanges += 1
                return
            }
            sessions[key, default: SessionState(createdAtUnix: at)].carts[store, default: StoredCart()].apply(change)
            touch(key, at)
        case .answer(let key, let name, let answer):
            sessions[key, default: SessionState(createdAtUnix: answer.atUnix)].answers[name] = answer
            touch(key, answer.atUnix)
        case .sessionRemoved(let key):
            sessions[key] = nil
        case .active(let key, let at):
            touch(key, at)
        case .account(let key, let a):
            sessions[key, default: SessionState(createdAtUnix: a.createdAtUnix)].account = a
        case .boundSession(let key, let owner, let at):
            var s = sessions[key] ?? SessionState(createdAtUnix: at)
            s.owner = owner
            sessions[key] = s
        case .sealed(let key, let owner):
            sessions[key]?.sealedInto = owner
        case .absorbed(let owner, let guest, let answer):
            sessions[owner, default: SessionState(createdAtUnix: answer.atUnix)].absorbed[guest] = answer
        case .ended(let key, let at):
            var mark = SessionState(createdAtUnix: at)
            mark.ended = true
            sessions[key] = mark
        }
    }

    private mutating func touch(_ key: SessionKey, _ at: Int64) {
        if let last = sessions[key]?.lastActiveUnix, last < at { sessions[key]?.lastActiveUnix = at }
    }

    /// The records that rebuild this state (a snapshot's contents).
    public func forEachRecord(_ body: (CustomerRecord) -> Void) {
        for (key, s) in sessions {
            if s.ended {
                body(.ended(key, createdAtUnix: s.createdAtUnix))
                body(.active(key, atUnix: s.lastActiveUnix))
                continue
            }
            body(.session(key, createdAtUnix: s.createdAtUnix))
            if let a = s.account { body(.account(key, a)) }
            if let owner = s.owner { body(.boundSession(key, owner: owner, createdAtUnix: s.createdAtUnix)) }
            if let owner = s.sealedInto { body(.sealed(key, owner: owner)) }
            for (store, cart) in s.carts { body(.cart(key, storeUID: store, cart, atUnix: s.createdAtUnix)) }
            for (name, answer) in s.answers { body(.answer(key, key: name, answer)) }
            for (guest, answer) in s.absorbed { body(.absorbed(owner: key, guest: guest, answer)) }
            body(.active(key, atUnix: s.lastActiveUnix))
        }
    }

    /// Forgets answers older than `answerLifetime` seconds (a retry after
    /// that is a new request) and removes sessions idle for longer than
    /// `idleLifetime`, with their carts (accounts stay, with their carts).
    /// Returns the sessions removed: they must be logged as removed; expired
    /// answers need no record, since every reader of the log applies the
    /// same rule.
    public mutating func expire(nowUnix: Int64, answerLifetime: Int64, idleLifetime: Int64) -> [SessionKey] {
        var removed: [SessionKey] = []
        sessions.removeAll { key, s in
            guard s.account == nil && nowUnix - s.lastActiveUnix > idleLifetime else { return false }
            removed.append(key)
            return true
        }
        sessions.modifyEach { _, s in
            if s.answers.values.contains(where: { nowUnix - $0.atUnix > answerLifetime }) {
                s.answers = s.answers.filter { nowUnix - $0.value.atUnix <= answerLifetime }
            }
            if s.absorbed.values.contains(where: { nowUnix - $0.atUnix > answerLifetime }) {
                s.absorbed = s.absorbed.filter { nowUnix - $0.value.atUnix <= answerLifetime }
            }
        }
        return removed
    }
}

/// The log's binary form of a record (little-endian; strings and blobs
/// are a u32 length and their bytes):
///
///     kind u8 = 1 session   key[32] created i64
///     kind u8 = 2 cart      key[32] store str version u64 at i64 count u32
///                           (product str quantity u32 seen_price i64) × count
///     kind u8 = 3 answer    key[32] idempotency_key str at i64 fingerprint str field u32 body blob
///     kind u8 = 4 removed   key[32]
///     kind u8 = 5 active    key[32] at i64
///     kind u8 = 6 account   key[32] email str name str password_hash str created i64
///     kind u8 = 7 bound     key[32] owner[32] created i64
///     kind u8 = 8 sealed    key[32] owner[32]
///     kind u8 = 9 absorbed  owner[32] guest[32] at i64 fingerprint str field u32 body blob
///     kind u8 = 10 cart line key[32] store str version u64 at i64 product str quantity u32 seen_price i64
///     kind u8 = 11 ended    key[32] created i64
enum CustomerRecordCodec {
    /// The highest kind this groserd writes and reads; a higher one is a
    /// newer groserd's record, not damage.
    static let newestKind: UInt8 = 11

    /// Appends the record's payload: measured first, then written in place
    /// through a raw pointer (one growth of `out`), by the same `encode`
    /// walk. Appending field by field cost about 1,300 instructions for a
    /// cart record under callgrind, a generic append per field.
    static func encode(_ record: CustomerRecord, to out: inout [UInt8]) {
        var size = Measure()
        encode(record, &size)
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: size.count))
        out.withUnsafeMutableBytes { raw in
            var w = Write(base: raw.baseAddress! + start)
            encode(record, &w)
            precondition(w.at == size.count, "CustomerRecordCodec: \(w.at) bytes written, \(size.count) measured")
        }
    }

    static func encode<S: Sink>(_ record: CustomerRecord, _ out: inout S) {
        switch record {
        case .session(let key, let at):
            out.byte(1); out.key(key); out.u64(UInt64(bitPattern: at))
        case .cart(let key, let store, let cart, let at):
            out.byte(2); out.key(key); out.str(store); out.u64(cart.version); out.u64(UInt64(bitPattern: at))
            out.u32(UInt32(cart.lines.count))
            for i in cart.lines.indices {
                out.str(cart.lines[i].productUID); out.u32(cart.lines[i].quantity)
                out.u64(UInt64(bitPattern: cart.lines[i].seenPriceMinorUnits))
            }
        case .cartLine(let key, let store, let c, let at):
            out.byte(10); out.key(key); out.str(store); out.u64(c.version); out.u64(UInt64(bitPattern: at))
            out.str(c.productUID); out.u32(c.quantity); out.u64(UInt64(bitPattern: c.seenPriceMinorUnits))
        case .answer(let key, let name, let a):
            out.byte(3); out.key(key); out.str(name); out.u64(UInt64(bitPattern: a.atUnix)); out.str(a.answer.fingerprint)
            out.u32(a.answer.field); out.blob(a.answer.body)
        case .sessionRemoved(let key):
            out.byte(4); out.key(key)
        case .active(let key, let at):
            out.byte(5); out.key(key); out.u64(UInt64(bitPattern: at))
        case .account(let key, let a):
            out.byte(6); out.key(key); out.str(a.email); out.str(a.name); out.str(a.passwordHash)
            out.u64(UInt64(bitPattern: a.createdAtUnix))
        case .boundSession(let key, let owner, let at):
            out.byte(7); out.key(key); out.key(owner); out.u64(UInt64(bitPattern: at))
        case .sealed(let key, let owner):
            out.byte(8); out.key(key); out.key(owner)
        case .absorbed(let owner, let guest, let a):
            out.byte(9); out.key(owner); out.key(guest); out.u64(UInt64(bitPattern: a.atUnix)); out.str(a.answer.fingerprint)
            out.u32(a.answer.field); out.blob(a.answer.body)
        case .ended(let key, let at):
            out.byte(11); out.key(key); out.u64(UInt64(bitPattern: at))
        }
    }

    /// Where `encode` puts a record: its size, or its bytes.
    protocol Sink {
        mutating func byte(_ v: UInt8)
        mutating func u32(_ v: UInt32)
        mutating func u64(_ v: UInt64)
        mutating func bytes(_ b: UnsafeRawBufferPointer)
    }

    struct Measure: Sink {
        var count = 0
        mutating func byte(_ v: UInt8) { count += 1 }
        mutating func u32(_ v: UInt32) { count += 4 }
        mutating func u64(_ v: UInt64) { count += 8 }
        mutating func bytes(_ b: UnsafeRawBufferPointer) { count += b.count }
    }

    struct Write: Sink {
        let base: UnsafeMutableRawPointer
        var at = 0
        mutating func byte(_ v: UInt8) { base.storeBytes(of: v, toByteOffset: at, as: UInt8.self); at += 1 }
        mutating func u32(_ v: UInt32) { base.storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt32.self); at += 4 }
        mutating func u64(_ v: UInt64) { base.storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt64.self); at += 8 }
        mutating func bytes(_ b: UnsafeRawBufferPointer) {
            guard let source = b.baseAddress, b.count > 0 else { return }
            (base + at).copyMemory(from: source, byteCount: b.count)
            at += b.count
        }
    }

    /// Decodes one record's payload; nil when it is malformed (which a
    /// good checksum makes a bug or a foreign file, not a torn write).
    static func decode(_ p: UnsafeRawBufferPointer) -> CustomerRecord? {
        var r = Reader(p)
        guard let kind = r.byte(), let key = r.key() else { return nil }
        let record: CustomerRecord?
        switch kind {
        case 1: record = r.i64().map { .session(key, createdAtUnix: $0) }
        case 2:
            guard let store = r.str(), let version = r.u64(), let at = r.i64(), let count = r.u32(),
                  Int(count) <= r.remaining / 16 else { return nil }
            var lines: [CartLineRecord] = []
            lines.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let uid = r.str(), let q = r.u32(), let seen = r.i64() else { return nil }
                lines.append(CartLineRecord(productUID: uid, quantity: q, seenPriceMinorUnits: seen))
            }
            record = .cart(key, storeUID: store, StoredCart(version: version, lines: lines), atUnix: at)
        case 3:
            guard let name = r.str(), let at = r.i64(), let print = r.str(), let field = r.u32(), let body = r.blob() else { return nil }
            record = .answer(key, key: name, StoredAnswer(IdempotentAnswer(fingerprint: print, field: field, body: body), atUnix: at))
        case 10:
            guard let store = r.str(), let version = r.u64(), let at = r.i64(), let uid = r.str(), let q = r.u32(),
                  let seen = r.i64() else { return nil }
            record = .cartLine(key, storeUID: store, CartLineChange(version: version, productUID: uid, quantity: q,
                                                                    seenPriceMinorUnits: seen), atUnix: at)
        case 4: record = .sessionRemoved(key)
        case 11: record = r.i64().map { .ended(key, createdAtUnix: $0) }
        case 5: record = r.i64().map { .active(key, atUnix: $0) }
        case 6:
            guard let email = r.str(), let name = r.str(), let hash = r.str(), let at = r.i64() else { return nil }
            record = .account(key, AccountRecord(email: email, name: name, passwordHash: hash, createdAtUnix: at))
        case 7:
            guard let owner = r.key(), let at = r.i64() else { return nil }
            record = .boundSession(key, owner: owner, createdAtUnix: at)
        case 8:
            record = r.key().map { .sealed(key, owner: $0) }
        case 9:
            guard let guest = r.key(), let at = r.i64(), let print = r.str(), let field = r.u32(), let body = r.blob() else { return nil }
            record = .absorbed(owner: key, guest: guest, StoredAnswer(IdempotentAnswer(fingerprint: print, field: field, body: body), atUnix: at))
        default: record = nil
        }
        return r.remaining == 0 ? record : nil
    }

    private struct Reader {
        let p: UnsafeRawBufferPointer
        var at = 0
        init(_ p: UnsafeRawBufferPointer) { self.p = p }
        var remaining: Int { p.count - at }
        mutating func byte() -> UInt8? {
            guard remaining >= 1 else { return nil }
            defer { at += 1 }
            return p[at]
        }
        mutating func u32() -> UInt32? {
            guard remaining >= 4 else { return nil }
            defer { at += 4 }
            return UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt32.self))
        }
        mutating func u64() -> UInt64? {
            guard remaining >= 8 else { return nil }
            defer { at += 8 }
            return UInt64(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }
        mutating func i64() -> Int64? { u64().map { Int64(bitPattern: $0) } }
        mutating func key() -> SessionKey? {
            guard remaining >= 32 else { return nil }
            defer { at += 32 }
            return SessionKey(digest: UnsafeRawBufferPointer(rebasing: p[at..<at + 32]))
        }
        mutating func bytes() -> UnsafeRawBufferPointer? {
            guard let n = u32(), Int(n) <= remaining else { return nil }
            defer { at += Int(n) }
            return UnsafeRawBufferPointer(rebasing: p[at..<at + Int(n)])
        }
        mutating func str() -> String? {
            guard let b = bytes() else { return nil }
            return String(decoding: b, as: UTF8.self)
        }
        mutating func blob() -> [UInt8]? { bytes().map { Array($0) } }
    }
}

extension CustomerRecordCodec.Sink {
    mutating func key(_ k: SessionKey) { k.withDigest { bytes($0) } }
    /// A u32 length, then the UTF-8 bytes.
    mutating func str(_ s: String) {
        var s = s
        s.withUTF8 { b in u32(UInt32(b.count)); bytes(UnsafeRawBufferPointer(b)) }
    }
    /// A u32 length, then the bytes.
    mutating func blob(_ b: [UInt8]) {
        u32(UInt32(b.count))
        b.withUnsafeBytes { bytes($0) }
    }
}
