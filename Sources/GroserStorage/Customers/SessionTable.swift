/// A shard's sessions by key, packed: the keys and states in two dense
/// arrays, found through an open-addressing index of 32-bit positions. A
/// dictionary of sessions kept a bucket of key and state for every 0.5 to
/// 0.75 of an entry, each page of it touched; here a session costs its key,
/// its state and 8 bytes of index.
///
/// Reads like the dictionary it replaces (`table[key]`, its entries as
/// `(key, value)` pairs, equality as a dictionary's). Positions
/// (`position(of:)`, `subscript(at:)`) hold until an entry is removed: adding
/// appends; removing moves the last entry into the hole.
public struct SessionTable: Sendable, Equatable, Sequence {
    public typealias Element = (key: SessionKey, value: SessionState)
    // Internal, not private: the lookups are inlined into the shard
    // (`@inlinable`); a `_modify` called across modules is a coroutine whose
    // frame is allocated on every call.
    @usableFromInline var keys: [SessionKey] = []
    @usableFromInline var states: [SessionState] = []
    /// A power of two of buckets, at most half full: 0 is empty, n is the
    /// entry at position n - 1. Linear probing; removal shifts back (no
    /// tombstones).
    @usableFromInline var buckets: [Int32] = []

    public init() {}

    @inlinable public var count: Int { keys.count }
    @inlinable public var isEmpty: Bool { keys.isEmpty }

    @inlinable var mask: Int { buckets.count - 1 }

    /// log2 of the bucket count, as a shift of a 64-bit product.
    @usableFromInline var shift: UInt64 = 64
    /// Mixed into every key's home: a random seed, so that keys a client can
    /// choose (an account's, from its email) do not pick their buckets.
    @usableFromInline let seed = SessionTable.processSeed
    /// One random seed a process (a table is made for every session a
    /// PostgreSQL commit encodes: a system random read each was too many).
    @usableFromInline static let processSeed = UInt64.random(in: .min ... .max)

    /// The key's home bucket: its first word (the key is a BLAKE2b hash)
    /// with the seed, by Fibonacci hashing (the product's top bits).
    /// Hasher's SipHash cost 150 instructions a lookup.
    @inlinable @inline(__always)
    func home(_ key: SessionKey) -> Int {
        Int(truncatingIfNeeded: ((key.firstWord ^ seed) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// Where the entry of `key` lies, or nil.
    @inlinable
    public func position(of key: SessionKey) -> Int? {
        guard !buckets.isEmpty else { return nil }
        var b = home(key)
        while true {
            let n = Int(buckets[b])
            if n == 0 { return nil }
            if keys[n - 1] == key { return n - 1 }
            b = (b + 1) & mask
        }
    }

    /// The state at a position `position(of:)` gave, read or changed in place.
    @inlinable @inline(__always)
    public subscript(at i: Int) -> SessionState {
        get { states[i] }
        _modify { yield &states[i] }
    }

    @inlinable
    public func key(at i: Int) -> SessionKey { keys[i] }

    public subscript(key: SessionKey) -> SessionState? {
        get { position(of: key).map { states[$0] } }
        _modify {
            // The state is moved out and back, not copied: changing it
            // through `table[key]?.x` copies none of its arrays.
            let i = position(of: key)
            var value: SessionState? = nil
            if let i { value = take(at: i) }
            defer {
                if let i {
                    if let value { states[i] = value } else { remove(at: i) }
                } else if let value {
                    insert(value, for: key)
                }
            }
            yield &value
        }
    }

    public subscript(key: SessionKey, default make: @autoclosure () -> SessionState) -> SessionState {
        get { self[key] ?? make() }
        _modify {
            let i: Int
            if let found = position(of: key) {
                i = found
            } else {
                insert(make(), for: key)
                i = keys.count - 1
            }
            yield &states[i]
        }
    }

    /// Sets the state of `key`; returns the one it replaced.
    @discardableResult
    public mutating func updateValue(_ state: SessionState, forKey key: SessionKey) -> SessionState? {
        if let i = position(of: key) {
            let old = take(at: i)
            states[i] = state
            return old
        }
        insert(state, for: key)
        return nil
    }

    @discardableResult
    public mutating func removeValue(forKey key: SessionKey) -> SessionState? {
        guard let i = position(of: key) else { return nil }
        let old = take(at: i)
        remove(at: i)
        return old
    }

    public func mapValues<T>(_ transform: (SessionState) throws -> T) rethrows -> [SessionKey: T] {
        var out: [SessionKey: T] = [:]
        out.reserveCapacity(count)
        for i in keys.indices { out[keys[i]] = try transform(states[i]) }
        return out
    }

    /// Changes every state in place.
    public mutating func modifyEach(_ body: (SessionKey, inout SessionState) throws -> Void) rethrows {
        for i in keys.indices { try body(keys[i], &states[i]) }
    }

    /// Removes the entries `remove` names, in one pass.
    public mutating func removeAll(where remove: (SessionKey, SessionState) throws -> Bool) rethrows {
        var i = 0
        while i < keys.count {
            if try remove(keys[i], states[i]) { self.remove(at: i) } else { i += 1 }
        }
    }

    public static func == (a: SessionTable, b: SessionTable) -> Bool {
        a.count == b.count && a.keys.indices.allSatisfy { b[a.keys[$0]] == a.states[$0] }
    }

    public struct Iterator: IteratorProtocol {
        fileprivate let table: SessionTable
        fileprivate var at = 0
        public mutating func next() -> Element? {
            guard at < table.keys.count else { return nil }
            defer { at += 1 }
            return (table.keys[at], table.states[at])
        }
    }

    public func makeIterator() -> Iterator { Iterator(table: self) }

    // MARK: - The index

    /// The state at `i`, leaving an empty one in its place (no copy of its
    /// arrays, no retain of its box).
    private mutating func take(at i: Int) -> SessionState {
        var out = SessionState(createdAtUnix: 0)
        swap(&out, &states[i])
        return out
    }

    private mutating func insert(_ state: SessionState, for key: SessionKey) {
        if (keys.count + 1) * 2 > buckets.count { rebuild(buckets: Swift.max(16, buckets.count * 2)) }
        keys.append(key)
        states.append(state)
        place(keys.count - 1)
    }

    /// Puts the entry at position `i` in the first empty bucket from its home.
    private mutating func place(_ i: Int) {
        var b = home(keys[i])
        while buckets[b] != 0 { b = (b + 1) & mask }
        buckets[b] = Int32(i + 1)
    }

    private mutating func rebuild(buckets count: Int) {
        precondition(count <= 1 << 31, "SessionTable: more sessions than 32-bit positions")
        buckets = Array(repeating: 0, count: count)
        shift = UInt64(64 - count.trailingZeroBitCount)
        for i in keys.indices { place(i) }
    }

    /// The bucket that holds position `i`.
    private func bucket(of i: Int) -> Int {
        var b = home(keys[i])
        while Int(buckets[b]) != i + 1 { b = (b + 1) & mask }
        return b
    }

    /// Removes the entry at `i`: its bucket is emptied with the entries
    /// after it in the run shifted back, and the last entry takes position `i`.
    private mutating func remove(at i: Int) {
        var hole = bucket(of: i)
        var b = (hole + 1) & mask
        while buckets[b] != 0 {
            let h = home(keys[Int(buckets[b]) - 1])
            // The entry at b may move back to the hole unless its home lies
            // cyclically after the hole, up to b.
            if (b - h) & mask >= (b - hole) & mask {
                buckets[hole] = buckets[b]
                hole = b
            }
            b = (b + 1) & mask
        }
        buckets[hole] = 0
        let last = keys.count - 1
        if i != last {
            buckets[bucket(of: last)] = Int32(i + 1)
            keys.swapAt(i, last)
            states.swapAt(i, last)
        }
        keys.removeLast()
        states.removeLast()
    }
}
