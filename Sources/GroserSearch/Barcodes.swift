/// A store's EAN-13 barcodes, sorted, for all-digit queries: a shopper
/// who types or scans a barcode means that one product. Kept apart from
/// the vocabulary so that a number in an ordinary query ("молоко 1 л")
/// never matches the first digits of some barcode.
struct Barcodes: Sendable {
    /// Barcodes as numbers, ascending (13 digits fit in 44 bits, and for
    /// numbers of one length numeric order is the digits' order).
    private let codes: [UInt64]
    /// The product (a position in the store) of each barcode.
    private let products: [UInt32]

    /// Fewer digits than this are a quantity or a price, not a barcode
    /// being typed (EAN-8 is the shortest barcode a shelf label carries).
    static let minimumDigits = 8
    static let digits = 13

    init(_ entries: [(code: UInt64, product: UInt32)]) {
        let sorted = entries.sorted { ($0.code, $0.product) < ($1.code, $1.product) }
        codes = sorted.map(\.code)
        products = sorted.map(\.product)
    }

    /// A 13-digit barcode as a number; nil for anything else.
    static func number(_ s: String) -> UInt64? {
        guard s.utf8.count == digits else { return nil }
        var n: UInt64 = 0
        for b in s.utf8 {
            guard (0x30...0x39).contains(b) else { return nil }
            n = n * 10 + UInt64(b - 0x30)
        }
        return n
    }

    /// The products whose barcode begins with `query` (8 to 13 digits, so
    /// 13 is the one barcode), in barcode order; empty for any other query.
    func products(matching query: Substring) -> [UInt32] {
        let q = query.utf8
        guard (Self.minimumDigits...Self.digits).contains(q.count), q.allSatisfy({ (0x30...0x39).contains($0) }) else { return [] }
        var scale: UInt64 = 1
        for _ in q.count..<Self.digits { scale *= 10 }
        let low = q.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - 0x30) } * scale
        let high = low + scale
        var lo = 0, hi = codes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if codes[mid] < low { lo = mid + 1 } else { hi = mid }
        }
        var found: [UInt32] = []
        while lo < codes.count, codes[lo] < high {
            found.append(products[lo])
            lo += 1
        }
        return found
    }

    var memoryBytes: Int { codes.count * 12 + 32 }
}
