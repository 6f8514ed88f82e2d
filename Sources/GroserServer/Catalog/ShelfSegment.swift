#if canImport(Glibc)
import Glibc
#endif
import GroserWire

/// One shelf's products, encoded once: the `Shelf` message (uid, name,
/// product_count, products) that GetShelf and GetStore send as it is, and
/// where each product's own encoding lies in it, for ListProducts' pages.
/// A price or stock change re-encodes the one shelf it touches.
public final class ShelfSegment: Sendable {
    public let uid: String
    public let name: String
    public let productCount: Int
    /// The encoded `Shelf` message, products included.
    let message: [UInt8]
    /// Each product's `Product` message inside `message`: its start and length.
    let productRanges: [ProductRange]
    /// Each product's stock, for search's ranking and in-stock filter.
    let outOfStock: [Bool]

    struct ProductRange: Sendable {
        var start: UInt32
        var count: UInt32
    }

    /// Encodes `shelf` (its products already sorted and with absolute image URLs).
    init(_ shelf: Shelf) {
        uid = shelf.uid
        name = shelf.name
        productCount = shelf.products.count
        // The message is the shelf's own fields, then each product as field 4,
        // written here from the products' encodings so their offsets are known.
        var head = shelf
        head.products = []
        head.productCount = UInt32(clamping: shelf.products.count)
        var out = BodyEncoder.shelf(head)
        var ranges: [ProductRange] = []
        ranges.reserveCapacity(shelf.products.count)
        for p in shelf.products {
            let bytes = BodyEncoder.product(p)
            ProtoWriter.appendTag(field: 4, wireType: ProtoWriter.wireLengthDelimited, to: &out)
            ProtoWriter.appendVarint(UInt64(bytes.count), to: &out)
            ranges.append(ProductRange(start: UInt32(out.count), count: UInt32(bytes.count)))
            out.append(contentsOf: bytes)
        }
        message = out
        productRanges = ranges
        outOfStock = shelf.products.map(\.outOfStock)
    }

    /// The products of `served` (this segment's products, in its order)
    /// whose encoding differs from the one at the same place in `old`: the
    /// ones a change touched, compared byte for byte, one shelf's worth.
    func changedProducts(since old: ShelfSegment, served: [Product]) -> [ProductChange] {
        var changed: [ProductChange] = []
        for (i, p) in served.enumerated() where i < productRanges.count {
            let same = i < old.productRanges.count && productRanges[i].count == old.productRanges[i].count
                && message.withUnsafeBytes { new in
                    old.message.withUnsafeBytes { was in
                        let a = productRanges[i], b = old.productRanges[i]
                        return memcmp(new.baseAddress! + Int(a.start), was.baseAddress! + Int(b.start), Int(a.count)) == 0
                    }
                }
            if !same {
                changed.append(ProductChange(uid: p.uid, shelfUID: uid, price: p.price, outOfStock: p.outOfStock))
            }
        }
        return changed
    }
}
