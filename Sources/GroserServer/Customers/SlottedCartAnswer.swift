import GroserStorage
import GroserWire

/// A cart mutation's answer written straight from the cart's stored lines
/// and their products' slots (each slot keeps the first fields of its
/// line encoded, `ProductSlot.head`): one walk over the lines totals and
/// measures them, a second writes them. No line is copied between the
/// walks, no String is touched and no slot retained, so a line costs the
/// copy of its head and a few numbers. A line without a slot is of a
/// product the catalog no longer has, and is not shown. The bytes are the
/// ones `BodyEncoder.cart` writes for the cart `CartRules.view` shows
/// (`CartAnswerTests`). Given the cart's `LineMemo` entry, lines whose
/// bytes it holds are copied from there, and the entry then holds the new
/// answer's lines.
struct SlottedCartAnswer {
    private typealias Field = CartBodyWriter.CartField
    private typealias Line = CartBodyWriter.LineField
    private typealias MoneyField = CartBodyWriter.MoneyField

    let subtotal: Int64
    let itemCount: UInt32
    /// The lines shown.
    let shown: Int
    /// The cart's currency (the default one for a cart with no line shown).
    let currency: String
    let version: UInt64
    private let storeUID: String
    private let currencyField: Int
    private let memo: LineMemo.Entry?
    /// The shown lines' bytes (a bound on what `writeLines` may write).
    private let linesEnd: Int
    /// The Cart message's size, and the CartResponse's around it.
    private let cartSize: Int
    let bodySize: Int

    /// Totals and measures `cart`'s shown lines; refuses a cart whose lines
    /// mix currencies or whose totals overflow, as `CartRules.show` does.
    init(_ cart: borrowing StoredCart, storeUID: String, defaultCurrency: String, memo: LineMemo.Entry? = nil) throws(Refusal) {
        var totals = ShownTotals()
        var currencyField = 0
        var linesSize = 0
        var shown = 0
        var knownStart = 0
        // The currency of the lines admitted so far, as a slot's key (0: none yet, or one a key cannot hold).
        var currencyKey: UInt64 = 0
        let remembered = memo?.lines ?? []
        try cart.lines.withUnsafeBufferPointer { (stored) throws(Refusal) in try remembered.withUnsafeBufferPointer { (known) throws(Refusal) in
            for i in stored.indices {
                guard stored[i].slot != nil else { continue }
                // Not retained: the cart holds the slot while it is shown.
                unowned(unsafe) let slot = stored[i].slot!
                // One currency a cart, its field measured once: a line in the
                // first line's currency needs no look at the string.
                if slot.currencyKey == 0 || slot.currencyKey != currencyKey {
                    try totals.admit(slot.currency)
                    if currencyField == 0 { currencyField = EncodedCartLine.currencyFieldSize(slot.currency) }
                    currencyKey = slot.currencyKey
                }
                let total = try totals.add(slot.priceMinorUnits, stored[i].quantity)
                if shown < known.count && Self.matches(known[shown], slot.serial, stored[i]) {
                    linesSize &+= known[shown].end &- knownStart
                } else {
                    let size = Self.lineSize(headCount: slot.head.count, price: slot.priceMinorUnits, outOfStock: slot.outOfStock,
                                             quantity: stored[i].quantity, seen: stored[i].seenPriceMinorUnits, total: total, currencyField)
                    linesSize &+= 1 &+ ProtoWriter.varintSize(UInt64(size)) &+ size
                }
                if shown < known.count { knownStart = known[shown].end }
                shown += 1
            }
        } }
        let currency = totals.currency ?? defaultCurrency
        if currencyField == 0 { currencyField = EncodedCartLine.currencyFieldSize(currency) }
        self.subtotal = totals.subtotal
        self.itemCount = totals.items
        self.shown = shown
        self.currency = currency
        self.version = cart.version
        self.storeUID = storeUID
        self.currencyField = currencyField
        // A cart whose lines are too many bytes to remember leaves the
        // entry as it is (emptying it, and filling it again next time, cost
        // an allocation or more a request).
        self.memo = linesSize <= LineMemo.entryBytes ? memo : nil
        linesEnd = linesSize
        var n = CartBodyWriter.stringFieldSize(Field.storeUID, storeUID) + linesSize
        n += ProtoWriter.lengthDelimitedFieldSize(Field.subtotal, EncodedCartLine.moneySize(totals.subtotal, currencyField))
        n += ProtoWriter.varintFieldSize(Field.itemCount, UInt64(totals.items))
        n += CartBodyWriter.stringFieldSize(Field.currency, currency)
        n += ProtoWriter.varintFieldSize(Field.version, cart.version)
        cartSize = n
        bodySize = ProtoWriter.lengthDelimitedFieldSize(CartBodyWriter.responseCart, n)
    }

    /// Whether `known` holds the bytes of `line`.
    @inline(__always)
    private static func matches(_ known: LineMemo.Line, _ serial: UInt64, _ line: borrowing CartLineRecord) -> Bool {
        known.slot == serial && known.quantity == line.quantity && known.seen == line.seenPriceMinorUnits
    }

    /// A CartLine's size, without its own tag and length. (Of the slot's
    /// fields, not of the slot: passing it would retain it.) Every field
    /// number of a line is under 16: a tag is one byte.
    @inline(__always)
    private static func lineSize(headCount: Int, price: Int64, outOfStock: Bool, quantity: UInt32, seen: Int64, total: Int64,
                                 _ currencyField: Int) -> Int {
        var n = headCount &+ ProtoWriter.varintFieldSize(Line.quantity, UInt64(quantity))
        n &+= 2 &+ EncodedCartLine.moneySize(total, currencyField)
        if seen != price { n &+= 4 &+ EncodedCartLine.moneySize(seen, currencyField) }
        if outOfStock { n &+= 2 }
        return n
    }

    /// The whole OK response frame's size.
    func frameSize(id: UInt64, field: MethodField) -> Int {
        ResponseFrameWriter.okFrameSize(id: id, field: field, bodyLength: bodySize)
    }

    /// Writes the whole OK response frame for `cart` (the cart measured,
    /// unchanged since but for lines without a slot, which are not shown) at `p`; returns the bytes written.
    func writeFrame(_ cart: borrowing StoredCart, id: UInt64, field: MethodField, into p: UnsafeMutableRawPointer) -> Int {
        let header = ResponseFrameWriter.writeOKHeader(id: id, field: field, bodyLength: bodySize, into: p)
        return header + writeBody(cart, into: p + header)
    }

    /// The CartResponse body alone, in an array.
    func body(_ cart: borrowing StoredCart) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bodySize) { buffer, count in
            count = writeBody(cart, into: UnsafeMutableRawPointer(buffer.baseAddress!))
        }
    }

    /// Writes the CartResponse body at `p`; returns the bytes written.
    private func writeBody(_ cart: borrowing StoredCart, into p: UnsafeMutableRawPointer) -> Int {
        var currency = currency
        return currency.withUTF8 { currencyBytes in
            var w = CartBodyWriter.Cursor(p.assumingMemoryBound(to: UInt8.self))
            w.header(CartBodyWriter.responseCart, cartSize)
            w.string(Field.storeUID, storeUID)
            cart.lines.withUnsafeBufferPointer { stored in
                if let memo {
                    w.written = writeLines(stored, memo, currencyBytes, at: w.base + w.written) - w.base
                    return
                }
                var q = w.base + w.written
                for i in stored.indices {
                    guard stored[i].slot != nil else { continue }
                    unowned(unsafe) let slot = stored[i].slot!
                    writeLine(slot, stored[i], currencyBytes, &q)
                }
                w.written = q - w.base
            }
            money(Field.subtotal, subtotal, currencyBytes, &w)
            w.varintField(Field.itemCount, UInt64(itemCount))
            w.shortBytes(Field.currency, currencyBytes)
            w.varintField(Field.version, version)
            precondition(w.written == bodySize, "SlottedCartAnswer: \(w.written) bytes written, \(bodySize) measured")
            return w.written
        }
    }

    /// Writes the shown lines at `start`, copying those `memo` holds from
    /// there (in runs: lines that stayed are next to each other in both),
    /// then makes `memo` hold the lines written. Returns where they end.
    private func writeLines(_ stored: UnsafeBufferPointer<CartLineRecord>, _ memo: LineMemo.Entry,
                            _ currencyBytes: UnsafeBufferPointer<UInt8>, at start: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        var q = start
        let known = memo.lines.count
        // The pending run of remembered bytes (copied when a line that
        // changed, or the end, comes), and where the next remembered line starts.
        var runStart = 0, runEnd = 0, knownStart = 0
        func flush(_ q: inout UnsafeMutablePointer<UInt8>) {
            guard runEnd > runStart else { return }
            // Never past the lines measured (a remembered end gone wrong
            // would otherwise write past the frame before any check).
            precondition(q - start + (runEnd - runStart) <= linesEnd && runEnd <= memo.bytes.count,
                         "SlottedCartAnswer: a remembered run past the lines measured")
            memo.bytes.withUnsafeBytes { old in
                UnsafeMutableRawPointer(q).copyMemory(from: old.baseAddress! + runStart, byteCount: runEnd - runStart)
            }
            q += runEnd - runStart
            runStart = runEnd
        }
        var shown = 0
        for i in stored.indices {
            guard stored[i].slot != nil else { continue }
            unowned(unsafe) let slot = stored[i].slot!
            if shown < known && Self.matches(memo.lines[shown], slot.serial, stored[i]) {
                let knownEnd = memo.lines[shown].end
                if runEnd == runStart { (runStart, runEnd) = (knownStart, knownStart) }
                // Where this line will end once the run is copied.
                memo.lines[shown].end = (q - start) &+ (knownEnd &- runStart)
                runEnd = knownEnd
                knownStart = knownEnd
            } else {
                flush(&q)
                if shown < known { knownStart = memo.lines[shown].end }
                writeLine(slot, stored[i], currencyBytes, &q)
                let line = LineMemo.Line(slot: slot.serial, quantity: stored[i].quantity, seen: stored[i].seenPriceMinorUnits,
                                         end: q - start)
                if shown < known { memo.lines[shown] = line } else { memo.lines.append(line) }
            }
            shown += 1
        }
        flush(&q)
        if shown < known { memo.lines.removeSubrange(shown...) }
        // The entry holds the lines written (`init` left out a cart of more
        // than `entryBytes`).
        let n = q - start
        precondition(n == linesEnd, "SlottedCartAnswer: \(n) bytes of lines written, \(linesEnd) measured")
        if memo.bytes.count > n {
            memo.bytes.removeLast(memo.bytes.count - n)
        } else if memo.bytes.count < n {
            memo.bytes.append(contentsOf: repeatElement(0, count: n - memo.bytes.count))
        }
        memo.bytes.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: start, byteCount: n) }
        return q
    }

    /// Writes one shown line's field.
    @inline(__always)
    private func writeLine(_ slot: ProductSlot, _ line: borrowing CartLineRecord, _ currencyBytes: UnsafeBufferPointer<UInt8>,
                           _ q: inout UnsafeMutablePointer<UInt8>) {
        let (head, price, outOfStock) = (slot.head, slot.priceMinorUnits, slot.outOfStock)
        let (quantity, seen) = (line.quantity, line.seenPriceMinorUnits)
        // Measured without overflow by `init`.
        let total = price &* Int64(quantity)
        Self.put(UInt8(Field.lines << 3 | ProtoWriter.wireLengthDelimited), &q)
        Self.put(UInt64(Self.lineSize(headCount: head.count, price: price, outOfStock: outOfStock, quantity: quantity,
                                      seen: seen, total: total, currencyField)), &q)
        if head.count > 0 {
            q.update(from: head.baseAddress!.assumingMemoryBound(to: UInt8.self), count: head.count)
            q += head.count
        }
        if quantity != 0 {
            Self.put(UInt8(Line.quantity << 3 | ProtoWriter.wireVarint), &q)
            Self.put(UInt64(quantity), &q)
        }
        money(UInt8(Line.lineTotal << 3 | ProtoWriter.wireLengthDelimited), total, currencyBytes, &q)
        if seen != price {
            Self.put(UInt8(Line.priceChanged << 3 | ProtoWriter.wireVarint), &q)
            Self.put(UInt8(1), &q)
            money(UInt8(Line.previousPrice << 3 | ProtoWriter.wireLengthDelimited), seen, currencyBytes, &q)
        }
        if outOfStock {
            Self.put(UInt8(Line.outOfStock << 3 | ProtoWriter.wireVarint), &q)
            Self.put(UInt8(1), &q)
        }
    }

    /// A Money field (`tag` is the field's one-byte tag).
    @inline(__always)
    private func money(_ tag: UInt8, _ minorUnits: Int64, _ currency: UnsafeBufferPointer<UInt8>,
                       _ q: inout UnsafeMutablePointer<UInt8>) {
        Self.put(tag, &q)
        Self.put(UInt64(EncodedCartLine.moneySize(minorUnits, currencyField)), &q)
        if minorUnits != 0 {
            Self.put(UInt8(MoneyField.minorUnits << 3 | ProtoWriter.wireVarint), &q)
            Self.put(UInt64(bitPattern: minorUnits), &q)
        }
        if currency.count > 0 {
            Self.put(UInt8(MoneyField.currency << 3 | ProtoWriter.wireLengthDelimited), &q)
            Self.put(UInt64(currency.count), &q)
            for i in 0..<currency.count { q[i] = currency[i] }
            q += currency.count
        }
    }

    /// A money field through the cursor (the cart's subtotal).
    @inline(__always)
    private func money(_ field: UInt32, _ minorUnits: Int64, _ currency: UnsafeBufferPointer<UInt8>,
                       _ w: inout CartBodyWriter.Cursor) {
        var q = w.base + w.written
        money(UInt8(field << 3 | ProtoWriter.wireLengthDelimited), minorUnits, currency, &q)
        w.written = q - w.base
    }

    @inline(__always)
    private static func put(_ byte: UInt8, _ q: inout UnsafeMutablePointer<UInt8>) {
        q.pointee = byte
        q += 1
    }

    @inline(__always)
    private static func put(_ value: UInt64, _ q: inout UnsafeMutablePointer<UInt8>) {
        q += ProtoWriter.putVarint(value, into: UnsafeMutableRawPointer(q), at: 0)
    }
}
