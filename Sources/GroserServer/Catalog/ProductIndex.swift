import GroserWire

/// A store's products by uid, for GetProducts: each product's uid hash
/// (FNV-1a, 64 bits) sorted, beside the product's position in the store's
/// order: 12 bytes a product, no String kept. A hash found is confirmed
/// against the uid in the product's own encoding, so a collision costs a
/// comparison, never a wrong answer.
struct ProductIndex: Sendable {
    private let hashes: [UInt64]
    private let positions: [UInt32]

    /// The index of `shelves` (a store's, in its order).
    init(_ shelves: [ShelfSegment]) {
        var pairs: [(UInt64, UInt32)] = []
        pairs.reserveCapacity(shelves.reduce(0) { $0 + $1.productCount })
        for shelf in shelves {
            for r in shelf.productRanges {
                pairs.append((Self.uidHash(of: shelf, r), UInt32(pairs.count)))
            }
        }
        pairs.sort { $0.0 < $1.0 }
        hashes = pairs.map(\.0)
        positions = pairs.map(\.1)
    }

    /// The positions (in the store's order) of the products whose uid may
    /// be `uid`: those with its hash.
    func candidates(for uid: String) -> ArraySlice<UInt32> {
        let h = Self.hash(uid.utf8)
        var lo = 0, hi = hashes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if hashes[mid] < h { lo = mid + 1 } else { hi = mid }
        }
        var end = lo
        while end < hashes.count && hashes[end] == h { end += 1 }
        return positions[lo..<end]
    }

    /// True when the product encoded at `r` in `shelf` has the uid `uid`.
    static func product(_ shelf: ShelfSegment, _ r: ShelfSegment.ProductRange, hasUID uid: String) -> Bool {
        withUID(of: shelf, r) { $0.elementsEqual(uid.utf8) }
    }

    /// True when two encoded products have the same uid.
    static func sameUID(_ a: (ShelfSegment, ShelfSegment.ProductRange), _ b: (ShelfSegment, ShelfSegment.ProductRange)) -> Bool {
        withUID(of: a.0, a.1) { x in withUID(of: b.0, b.1) { y in x.elementsEqual(y) } }
    }

    /// `body` with the uid of the product encoded at `r` in `shelf` (the
    /// `Product` message's field 1; empty when it has none), read in place.
    private static func withUID<R>(of shelf: ShelfSegment, _ r: ShelfSegment.ProductRange,
                                   _ body: (UnsafeRawBufferPointer) -> R) -> R {
        shelf.message.withUnsafeBytes { raw in
            var reader = WireReader(UnsafeRawBufferPointer(rebasing: raw[Int(r.start)..<Int(r.start + r.count)]))
            while let key = reader.varint() {
                if key == 0x0a, let uid = reader.lengthDelimited() { return body(uid) }
                guard key != 0x0a, reader.skip(wireType: key & 7) else { break }
            }
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    private static func uidHash(of shelf: ShelfSegment, _ r: ShelfSegment.ProductRange) -> UInt64 {
        withUID(of: shelf, r) { hash($0) }
    }

    private static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return h
    }
}
