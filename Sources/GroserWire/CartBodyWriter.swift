/// CartResponse written field by field with ProtoWriter, not through
/// protobuf-c: every cart request answers with the whole cart, and building
/// protobuf-c's structs for it (an arena, a C string per field, a pack) was
/// a quarter of a cart-add's instructions under callgrind. The bytes are the
/// ones protobuf-c writes (fields in number order, proto3 defaults left out);
/// `CartBodyWriterTests` checks that against protobuf-c for many carts.
enum CartBodyWriter {
    // Field numbers, from cart.proto and catalog.proto.
    private enum MoneyField { static let minorUnits: UInt32 = 1, currency: UInt32 = 2 }
    private enum LineField {
        static let productUID: UInt32 = 1, name: UInt32 = 2, unitPrice: UInt32 = 3, quantity: UInt32 = 4
        static let lineTotal: UInt32 = 5, priceChanged: UInt32 = 6, previousPrice: UInt32 = 7, outOfStock: UInt32 = 8
    }
    private enum CartField {
        static let storeUID: UInt32 = 1, lines: UInt32 = 2, subtotal: UInt32 = 3, itemCount: UInt32 = 4
        static let currency: UInt32 = 5, version: UInt32 = 6
    }
    private static let responseCart: UInt32 = 1

    static func cartResponse(_ cart: Cart) -> [UInt8] {
        let cartSize = size(cart)
        let total = ProtoWriter.lengthDelimitedFieldSize(responseCart, cartSize)
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var w = Cursor(buffer.baseAddress!)
            w.header(responseCart, cartSize)
            write(cart, &w)
            precondition(w.written == total, "CartBodyWriter: \(w.written) bytes written, \(total) sized")
            count = total
        }
    }

    /// Writes into a buffer sized beforehand by the `size` functions.
    private struct Cursor {
        let base: UnsafeMutablePointer<UInt8>
        var written = 0
        init(_ base: UnsafeMutablePointer<UInt8>) { self.base = base }

        @inline(__always)
        mutating func varint(_ value: UInt64) {
            written = ProtoWriter.putVarint(value, into: UnsafeMutableRawPointer(base), at: written)
        }
        @inline(__always)
        mutating func header(_ field: UInt32, _ length: Int) {
            varint(UInt64(field << 3 | ProtoWriter.wireLengthDelimited))
            varint(UInt64(length))
        }
        @inline(__always)
        mutating func varintField(_ field: UInt32, _ value: UInt64) {
            guard value != 0 else { return }
            varint(UInt64(field << 3 | ProtoWriter.wireVarint))
            varint(value)
        }
        mutating func string(_ field: UInt32, _ s: String) {
            var s = s
            s.withUTF8 { utf8 in
                guard utf8.count > 0 else { return }
                header(field, utf8.count)
                (base + written).update(from: utf8.baseAddress!, count: utf8.count)
                written += utf8.count
            }
        }
    }

    // MARK: Sizes (of the message's own bytes, without its tag and length)

    private static func stringFieldSize(_ field: UInt32, _ s: String) -> Int {
        let n = s.utf8.count
        return n == 0 ? 0 : ProtoWriter.lengthDelimitedFieldSize(field, n)
    }

    private static func messageFieldSize(_ field: UInt32, _ size: Int) -> Int {
        ProtoWriter.lengthDelimitedFieldSize(field, size)
    }

    private static func size(_ m: Money) -> Int {
        ProtoWriter.varintFieldSize(MoneyField.minorUnits, UInt64(bitPattern: m.minorUnits))
            + stringFieldSize(MoneyField.currency, m.currency)
    }

    private static func size(_ l: borrowing CartLine) -> Int {
        var n = stringFieldSize(LineField.productUID, l.productUID) + stringFieldSize(LineField.name, l.name)
        n += messageFieldSize(LineField.unitPrice, size(l.unitPrice))
        n += ProtoWriter.varintFieldSize(LineField.quantity, UInt64(l.quantity))
        n += messageFieldSize(LineField.lineTotal, size(l.lineTotal))
        n += ProtoWriter.varintFieldSize(LineField.priceChanged, l.priceChanged ? 1 : 0)
        if let p = l.previousPrice { n += messageFieldSize(LineField.previousPrice, size(p)) }
        n += ProtoWriter.varintFieldSize(LineField.outOfStock, l.outOfStock ? 1 : 0)
        return n
    }

    private static func size(_ c: Cart) -> Int {
        var n = stringFieldSize(CartField.storeUID, c.storeUID)
        c.lines.withUnsafeBufferPointer { lines in
            for i in lines.indices { n += messageFieldSize(CartField.lines, size(lines[i])) }
        }
        n += messageFieldSize(CartField.subtotal, size(c.subtotal))
        n += ProtoWriter.varintFieldSize(CartField.itemCount, UInt64(c.itemCount))
        n += stringFieldSize(CartField.currency, c.currency)
        n += ProtoWriter.varintFieldSize(CartField.version, c.version)
        return n
    }

    // MARK: Writing

    private static func write(_ field: UInt32, _ m: Money, _ w: inout Cursor) {
        w.header(field, size(m))
        w.varintField(MoneyField.minorUnits, UInt64(bitPattern: m.minorUnits))
        w.string(MoneyField.currency, m.currency)
    }

    private static func write(_ l: borrowing CartLine, _ w: inout Cursor) {
        w.header(CartField.lines, size(l))
        w.string(LineField.productUID, l.productUID)
        w.string(LineField.name, l.name)
        write(LineField.unitPrice, l.unitPrice, &w)
        w.varintField(LineField.quantity, UInt64(l.quantity))
        write(LineField.lineTotal, l.lineTotal, &w)
        w.varintField(LineField.priceChanged, l.priceChanged ? 1 : 0)
        if let p = l.previousPrice { write(LineField.previousPrice, p, &w) }
        w.varintField(LineField.outOfStock, l.outOfStock ? 1 : 0)
    }

    private static func write(_ c: Cart, _ w: inout Cursor) {
        w.string(CartField.storeUID, c.storeUID)
        // Borrowed from the buffer: `for l in c.lines` copied every line.
        c.lines.withUnsafeBufferPointer { lines in
            for i in lines.indices { write(lines[i], &w) }
        }
        write(CartField.subtotal, c.subtotal, &w)
        w.varintField(CartField.itemCount, UInt64(c.itemCount))
        w.string(CartField.currency, c.currency)
        w.varintField(CartField.version, c.version)
    }
}
