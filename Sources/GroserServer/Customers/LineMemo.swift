import GroserStorage

/// The encoded lines of carts a shard answered for lately, so that the next
/// change of a cart encodes only the lines that changed: a cart's answer
/// is mostly its lines, and encoding them all again for every change made a
/// 20-line cart's add cost 1.6 times a one-line cart's (BENCHMARKS.md).
///
/// Each remembered line keeps what its bytes were written from: its
/// product's slot's serial (never reused; a product that changes gets a
/// new slot), its quantity and the price the customer saw. A line whose
/// three match is its bytes, whatever cart the entry was made for, so an
/// entry of another cart, or of a change undone, costs a miss, never a
/// wrong answer; and no slot is kept alive by the memo.
///
/// Bounded: `entryCount` entries, one per cart place hashed (a cart's
/// session position and its place among the session's carts), each of
/// at most `entryBytes` bytes of lines (a larger cart's answer leaves its
/// entry alone) and 32 bytes a line beside them; carts of fewer than
/// `minimumLines` lines are encoded whole (remembering costs more than it
/// saves there). Memory does not grow with the sessions held. The shard's
/// thread only.
final class LineMemo {
    static let entryCount = 512
    static let entryBytes = 8 * 1024
    static let minimumLines = 4

    /// What one line's bytes were written from, and where they end in `bytes`.
    struct Line {
        /// The product's slot's `serial`.
        var slot: UInt64
        var quantity: UInt32
        var seen: Int64
        var end: Int
    }

    /// One cart's lines: each shown line's field (its tag, length and
    /// CartLine), back to back in `bytes`.
    final class Entry {
        @exclusivity(unchecked) var lines: [Line] = []
        @exclusivity(unchecked) var bytes: [UInt8] = []
    }

    private var entries: [Entry?] = Array(repeating: nil, count: LineMemo.entryCount)

    /// The entry for the cart at `place` of the session at `holder`, made
    /// when there is none; nil for a cart too small to remember.
    func entry(holder: Int, place: Int, lines: Int) -> Entry? {
        guard lines >= Self.minimumLines else { return nil }
        let hash = UInt64(truncatingIfNeeded: holder &* 31 &+ place) &* 0x9E37_79B9_7F4A_7C15
        let i = Int(truncatingIfNeeded: hash >> 55) & (Self.entryCount - 1)
        if let e = entries[i] { return e }
        let e = Entry()
        entries[i] = e
        return e
    }
}
