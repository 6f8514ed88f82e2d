/// A cart's answer written from lines whose fixed fields are encoded
/// already: a customer shard keeps each product's uid, name and unit price
/// as the bytes a CartLine starts with (`EncodedCartLine.head(productUID:
/// name:unitPrice:currency:)`), so a line costs a copy of those bytes and a
/// few numbers, with no String touched and no reference counted. The bytes
/// are the ones `CartBodyWriter` writes for the same cart
/// (`CartAnswerTests` compares the two).
public struct EncodedCartLine {
    /// CartLine's fields 1 to 3 (product uid, name, unit price), encoded;
    /// held by the caller for as long as the writer runs.
    public var head: UnsafeRawBufferPointer
    /// The unit price `head` holds (a line says when it differs from the seen price).
    public var unitPriceMinorUnits: Int64
    public var quantity: UInt32
    /// The price times the quantity.
    public var totalMinorUnits: Int64
    /// The price the customer last saw.
    public var seenPriceMinorUnits: Int64
    public var outOfStock: Bool
    /// The CartLine message's size (without its own tag and length),
    /// measured once for the writer's two passes.
    @usableFromInline let size: Int
    /// The sizes of the line's total and previous price Money messages,
    /// measured once for both passes.
    @usableFromInline let totalMoneySize: Int32
    @usableFromInline let seenMoneySize: Int32

    /// A line whose money is in a currency whose Money field takes
    /// `currencyFieldSize` bytes (`currencyFieldSize(_:)`; every line of a
    /// cart is in the cart's currency). Inlinable: a shard makes one a line
    /// shown, and a call here kept the line's product slot retained.
    @inlinable
    public init(head: UnsafeRawBufferPointer, unitPriceMinorUnits: Int64, quantity: UInt32, totalMinorUnits: Int64,
                seenPriceMinorUnits: Int64, outOfStock: Bool, currencyFieldSize currencyField: Int) {
        self.head = head
        self.unitPriceMinorUnits = unitPriceMinorUnits
        self.quantity = quantity
        self.totalMinorUnits = totalMinorUnits
        self.seenPriceMinorUnits = seenPriceMinorUnits
        self.outOfStock = outOfStock
        typealias Line = CartBodyWriter.LineField
        var n = head.count
        n += ProtoWriter.varintFieldSize(Line.quantity, UInt64(quantity))
        let total = EncodedCartWriter.moneySize(totalMinorUnits, currencyField)
        totalMoneySize = Int32(total)
        n += ProtoWriter.lengthDelimitedFieldSize(Line.lineTotal, total)
        if seenPriceMinorUnits != unitPriceMinorUnits {
            let seen = EncodedCartWriter.moneySize(seenPriceMinorUnits, currencyField)
            seenMoneySize = Int32(seen)
            n += ProtoWriter.varintFieldSize(Line.priceChanged, 1)
            n += ProtoWriter.lengthDelimitedFieldSize(Line.previousPrice, seen)
        } else {
            seenMoneySize = 0
        }
        if outOfStock { n += ProtoWriter.varintFieldSize(Line.outOfStock, 1) }
        size = n
    }

    /// The size of a Money message's currency field for `currency`.
    public static func currencyFieldSize(_ currency: String) -> Int {
        CartBodyWriter.stringFieldSize(CartBodyWriter.MoneyField.currency, currency)
    }

    /// The head of a line for this product: its uid, name and unit price
    /// fields, the price in `currency`.
    public static func head(productUID: String, name: String, unitPrice: Int64, currency: String) -> [UInt8] {
        var out: [UInt8] = []
        for (field, text) in [(CartBodyWriter.LineField.productUID, productUID), (CartBodyWriter.LineField.name, name)] where !text.isEmpty {
            ProtoWriter.appendLengthDelimitedHeader(field, text.utf8.count, to: &out)
            out.append(contentsOf: text.utf8)
        }
        let currencyField = currencyFieldSize(currency)
        ProtoWriter.appendLengthDelimitedHeader(CartBodyWriter.LineField.unitPrice,
                                                EncodedCartWriter.moneySize(unitPrice, currencyField), to: &out)
        ProtoWriter.appendVarintField(CartBodyWriter.MoneyField.minorUnits, UInt64(bitPattern: unitPrice), to: &out)
        if !currency.isEmpty {
            ProtoWriter.appendLengthDelimitedHeader(CartBodyWriter.MoneyField.currency, currency.utf8.count, to: &out)
            out.append(contentsOf: currency.utf8)
        }
        return out
    }
}

extension BodyEncoder {
    /// The whole OK response frame of a cart answer (request `id`, method
    /// `field`), appended to `out`; every line's money is in `currency`.
    public static func appendCartFrame(to out: inout [UInt8], id: UInt64, field: MethodField, storeUID: String,
                                       lines: UnsafeBufferPointer<EncodedCartLine>, subtotalMinorUnits: Int64,
                                       itemCount: UInt32, currency: String, version: UInt64) {
        let w = EncodedCartWriter(storeUID: storeUID, lines: lines, subtotal: subtotalMinorUnits, itemCount: itemCount,
                                  currency: currency, version: version)
        let total = w.frameSize(id: id, field: field)
        withUnsafeTemporaryAllocation(byteCount: total, alignment: 1) { buffer in
            let written = w.writeFrame(id: id, field: field, into: buffer.baseAddress!)
            precondition(written == total, "EncodedCartWriter: \(written) bytes written, \(total) sized")
            out.append(contentsOf: UnsafeRawBufferPointer(buffer))
        }
    }

    /// The CartResponse body alone, for the same parts.
    public static func cart(storeUID: String, lines: UnsafeBufferPointer<EncodedCartLine>, subtotalMinorUnits: Int64,
                            itemCount: UInt32, currency: String, version: UInt64) -> [UInt8] {
        let w = EncodedCartWriter(storeUID: storeUID, lines: lines, subtotal: subtotalMinorUnits, itemCount: itemCount,
                                  currency: currency, version: version)
        return [UInt8](unsafeUninitializedCapacity: w.bodySize) { buffer, count in
            count = w.writeBody(into: UnsafeMutableRawPointer(buffer.baseAddress!))
            precondition(count == w.bodySize, "EncodedCartWriter: \(count) bytes written, \(w.bodySize) sized")
        }
    }
}

/// Sizes, then writes, a CartResponse (or its whole OK frame) from encoded
/// lines, straight into memory the caller sized with `frameSize`.
public struct EncodedCartWriter {
    typealias Field = CartBodyWriter.CartField
    typealias Line = CartBodyWriter.LineField
    typealias MoneyField = CartBodyWriter.MoneyField

    let lines: UnsafeBufferPointer<EncodedCartLine>
    /// The cart's own fields.
    let cart: (storeUID: String, subtotal: Int64, itemCount: UInt32, currency: String, version: UInt64)
    /// The size of the Cart message, and of the CartResponse around it.
    let cartSize: Int
    public let bodySize: Int

    public init(storeUID: String, lines: UnsafeBufferPointer<EncodedCartLine>, subtotal: Int64, itemCount: UInt32,
                currency: String, version: UInt64) {
        self.lines = lines
        cart = (storeUID, subtotal, itemCount, currency, version)
        let currencyField = CartBodyWriter.stringFieldSize(MoneyField.currency, currency)
        var n = CartBodyWriter.stringFieldSize(Field.storeUID, storeUID)
        for i in lines.indices { n += ProtoWriter.lengthDelimitedFieldSize(Field.lines, lines[i].size) }
        n += ProtoWriter.lengthDelimitedFieldSize(Field.subtotal, Self.moneySize(subtotal, currencyField))
        n += ProtoWriter.varintFieldSize(Field.itemCount, UInt64(itemCount))
        n += CartBodyWriter.stringFieldSize(Field.currency, currency)
        n += ProtoWriter.varintFieldSize(Field.version, version)
        cartSize = n
        bodySize = ProtoWriter.lengthDelimitedFieldSize(CartBodyWriter.responseCart, n)
    }

    /// The whole OK response frame's size.
    public func frameSize(id: UInt64, field: MethodField) -> Int {
        ResponseFrameWriter.okFrameSize(id: id, field: field, bodyLength: bodySize)
    }

    /// Writes the whole OK response frame at `p`; returns the bytes written.
    public func writeFrame(id: UInt64, field: MethodField, into p: UnsafeMutableRawPointer) -> Int {
        let header = ResponseFrameWriter.writeOKHeader(id: id, field: field, bodyLength: bodySize, into: p)
        return header + writeBody(into: p + header)
    }

    /// Writes the CartResponse body at `p`; returns the bytes written.
    public func writeBody(into p: UnsafeMutableRawPointer) -> Int {
        var currency = cart.currency
        var storeUID = cart.storeUID
        return currency.withUTF8 { currencyBytes in storeUID.withUTF8 { storeBytes in
            let currencyField = currencyBytes.isEmpty ? 0 : ProtoWriter.lengthDelimitedFieldSize(MoneyField.currency, currencyBytes.count)
            var w = CartBodyWriter.Cursor(p.assumingMemoryBound(to: UInt8.self))
            w.header(CartBodyWriter.responseCart, cartSize)
            w.bytes(Field.storeUID, storeBytes)
            for i in lines.indices {
                let l = lines.baseAddress! + i
                w.header(Field.lines, l.pointee.size)
                if l.pointee.head.count > 0 {
                    (w.base + w.written).update(from: l.pointee.head.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                count: l.pointee.head.count)
                    w.written += l.pointee.head.count
                }
                w.varintField(Line.quantity, UInt64(l.pointee.quantity))
                money(Line.lineTotal, l.pointee.totalMinorUnits, Int(l.pointee.totalMoneySize), currencyBytes, &w)
                if l.pointee.seenPriceMinorUnits != l.pointee.unitPriceMinorUnits {
                    w.varintField(Line.priceChanged, 1)
                    money(Line.previousPrice, l.pointee.seenPriceMinorUnits, Int(l.pointee.seenMoneySize), currencyBytes, &w)
                }
                if l.pointee.outOfStock { w.varintField(Line.outOfStock, 1) }
            }
            money(Field.subtotal, cart.subtotal, Self.moneySize(cart.subtotal, currencyField), currencyBytes, &w)
            w.varintField(Field.itemCount, UInt64(cart.itemCount))
            w.bytes(Field.currency, currencyBytes)
            w.varintField(Field.version, cart.version)
            return w.written
        } }
    }

    /// A Money message's size (inlinable: `EncodedCartLine.init` is).
    @inlinable
    static func moneySize(_ minorUnits: Int64, _ currencyField: Int) -> Int {
        ProtoWriter.varintFieldSize(CartBodyWriter.MoneyField.minorUnits, UInt64(bitPattern: minorUnits)) + currencyField
    }

    /// A Money field of `size` bytes (`moneySize`, measured already).
    @inline(__always)
    private func money(_ field: UInt32, _ minorUnits: Int64, _ size: Int, _ currency: UnsafeBufferPointer<UInt8>,
                       _ w: inout CartBodyWriter.Cursor) {
        w.header(field, size)
        w.varintField(MoneyField.minorUnits, UInt64(bitPattern: minorUnits))
        w.shortBytes(MoneyField.currency, currency)
    }
}
