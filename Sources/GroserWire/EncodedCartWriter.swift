/// A cart's answer written from lines whose fixed fields are encoded
/// already: a customer shard keeps each product's uid and name as the
/// bytes a CartLine starts with (`EncodedCartLine.head(productUID:name:)`),
/// so a line costs a copy of those bytes and a few numbers, with no String
/// touched and no reference counted. The bytes are the ones `CartBodyWriter`
/// writes for the same cart (`EncodedCartWriterTests` compares the two).
public struct EncodedCartLine {
    /// CartLine's fields 1 and 2 (product uid, name), encoded; held by the
    /// caller for as long as the writer runs.
    public var head: UnsafeRawBufferPointer
    public var unitPriceMinorUnits: Int64
    public var quantity: UInt32
    /// The price times the quantity.
    public var totalMinorUnits: Int64
    /// The price the customer last saw.
    public var seenPriceMinorUnits: Int64
    public var outOfStock: Bool

    public init(head: UnsafeRawBufferPointer, unitPriceMinorUnits: Int64, quantity: UInt32, totalMinorUnits: Int64,
                seenPriceMinorUnits: Int64, outOfStock: Bool) {
        self.head = head
        self.unitPriceMinorUnits = unitPriceMinorUnits
        self.quantity = quantity
        self.totalMinorUnits = totalMinorUnits
        self.seenPriceMinorUnits = seenPriceMinorUnits
        self.outOfStock = outOfStock
    }

    /// The head of a line for this product: its uid and name fields.
    public static func head(productUID: String, name: String) -> [UInt8] {
        var out: [UInt8] = []
        for (field, text) in [(CartBodyWriter.LineField.productUID, productUID), (CartBodyWriter.LineField.name, name)] where !text.isEmpty {
            ProtoWriter.appendLengthDelimitedHeader(field, text.utf8.count, to: &out)
            out.append(contentsOf: text.utf8)
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
        EncodedCartWriter(storeUID: storeUID, lines: lines, subtotal: subtotalMinorUnits, itemCount: itemCount,
                          currency: currency, version: version).append(to: &out, frame: (id, field))
    }

    /// The CartResponse body alone, for the same parts.
    public static func cart(storeUID: String, lines: UnsafeBufferPointer<EncodedCartLine>, subtotalMinorUnits: Int64,
                            itemCount: UInt32, currency: String, version: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        EncodedCartWriter(storeUID: storeUID, lines: lines, subtotal: subtotalMinorUnits, itemCount: itemCount,
                          currency: currency, version: version).append(to: &out, frame: nil)
        return out
    }
}

/// Sizes, then writes, a CartResponse from encoded lines.
struct EncodedCartWriter {
    typealias Field = CartBodyWriter.CartField
    typealias Line = CartBodyWriter.LineField
    typealias MoneyField = CartBodyWriter.MoneyField

    let storeUID: String
    let lines: UnsafeBufferPointer<EncodedCartLine>
    let subtotal: Int64
    let itemCount: UInt32
    let currency: String
    let version: UInt64

    /// The currency's field inside a Money message, its size.
    private var currencyFieldSize: Int { CartBodyWriter.stringFieldSize(MoneyField.currency, currency) }

    private func moneySize(_ minorUnits: Int64, _ currencyField: Int) -> Int {
        ProtoWriter.varintFieldSize(MoneyField.minorUnits, UInt64(bitPattern: minorUnits)) + currencyField
    }

    private func lineSize(_ l: EncodedCartLine, _ currencyField: Int) -> Int {
        var n = l.head.count
        n += ProtoWriter.lengthDelimitedFieldSize(Line.unitPrice, moneySize(l.unitPriceMinorUnits, currencyField))
        n += ProtoWriter.varintFieldSize(Line.quantity, UInt64(l.quantity))
        n += ProtoWriter.lengthDelimitedFieldSize(Line.lineTotal, moneySize(l.totalMinorUnits, currencyField))
        if l.seenPriceMinorUnits != l.unitPriceMinorUnits {
            n += ProtoWriter.varintFieldSize(Line.priceChanged, 1)
            n += ProtoWriter.lengthDelimitedFieldSize(Line.previousPrice, moneySize(l.seenPriceMinorUnits, currencyField))
        }
        if l.outOfStock { n += ProtoWriter.varintFieldSize(Line.outOfStock, 1) }
        return n
    }

    func append(to out: inout [UInt8], frame: (id: UInt64, field: MethodField)?) {
        let currencyField = currencyFieldSize
        var cartSize = CartBodyWriter.stringFieldSize(Field.storeUID, storeUID)
        for i in lines.indices { cartSize += ProtoWriter.lengthDelimitedFieldSize(Field.lines, lineSize(lines[i], currencyField)) }
        cartSize += ProtoWriter.lengthDelimitedFieldSize(Field.subtotal, moneySize(subtotal, currencyField))
        cartSize += ProtoWriter.varintFieldSize(Field.itemCount, UInt64(itemCount))
        cartSize += CartBodyWriter.stringFieldSize(Field.currency, currency)
        cartSize += ProtoWriter.varintFieldSize(Field.version, version)
        let bodySize = ProtoWriter.lengthDelimitedFieldSize(CartBodyWriter.responseCart, cartSize)
        let total = frame.map { ResponseFrameWriter.okFrameSize(id: $0.id, field: $0.field, bodyLength: bodySize) } ?? bodySize
        var currency = currency
        var storeUID = storeUID
        currency.withUTF8 { currencyBytes in storeUID.withUTF8 { storeBytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { buffer in
                var w = CartBodyWriter.Cursor(buffer.baseAddress!)
                if let frame {
                    w.written = ResponseFrameWriter.writeOKHeader(id: frame.id, field: frame.field, bodyLength: bodySize,
                                                                  into: UnsafeMutableRawPointer(buffer.baseAddress!))
                }
                w.header(CartBodyWriter.responseCart, cartSize)
                w.bytes(Field.storeUID, storeBytes)
                for i in lines.indices {
                    let l = lines[i]
                    w.header(Field.lines, lineSize(l, currencyField))
                    if l.head.count > 0 {
                        (w.base + w.written).update(from: l.head.baseAddress!.assumingMemoryBound(to: UInt8.self), count: l.head.count)
                        w.written += l.head.count
                    }
                    money(Line.unitPrice, l.unitPriceMinorUnits, currencyBytes, currencyField, &w)
                    w.varintField(Line.quantity, UInt64(l.quantity))
                    money(Line.lineTotal, l.totalMinorUnits, currencyBytes, currencyField, &w)
                    if l.seenPriceMinorUnits != l.unitPriceMinorUnits {
                        w.varintField(Line.priceChanged, 1)
                        money(Line.previousPrice, l.seenPriceMinorUnits, currencyBytes, currencyField, &w)
                    }
                    if l.outOfStock { w.varintField(Line.outOfStock, 1) }
                }
                money(Field.subtotal, subtotal, currencyBytes, currencyField, &w)
                w.varintField(Field.itemCount, UInt64(itemCount))
                w.bytes(Field.currency, currencyBytes)
                w.varintField(Field.version, version)
                precondition(w.written == total, "EncodedCartWriter: \(w.written) bytes written, \(total) sized")
                out.append(contentsOf: UnsafeBufferPointer(buffer))
            }
        } }
    }

    private func money(_ field: UInt32, _ minorUnits: Int64, _ currency: UnsafeBufferPointer<UInt8>, _ currencyField: Int,
                       _ w: inout CartBodyWriter.Cursor) {
        w.header(field, moneySize(minorUnits, currencyField))
        w.varintField(MoneyField.minorUnits, UInt64(bitPattern: minorUnits))
        w.bytes(MoneyField.currency, currency)
    }
}
