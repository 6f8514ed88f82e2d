/// CartResponse written field by field with ProtoWriter, not through
/// protobuf-c: every cart request answers with the whole cart, and building
/// protobuf-c's structs for it (an arena, a C string per field, a pack) was
/// a quarter of a cart-add's instructions under callgrind. The bytes are the
/// ones protobuf-c writes (fields in number order, proto3 defaults left out);
/// `CartBodyWriterTests` checks that against protobuf-c for many carts.
public enum CartBodyWriter {
    // Field numbers, from cart.proto and catalog.proto.
    public enum MoneyField { public static let minorUnits: UInt32 = 1, currency: UInt32 = 2 }
    public enum LineField {
        public static let productUID: UInt32 = 1, name: UInt32 = 2, unitPrice: UInt32 = 3, quantity: UInt32 = 4
        public static let lineTotal: UInt32 = 5, priceChanged: UInt32 = 6, previousPrice: UInt32 = 7, outOfStock: UInt32 = 8
    }
    public enum CartField {
        public static let storeUID: UInt32 = 1, lines: UInt32 = 2, subtotal: UInt32 = 3, itemCount: UInt32 = 4
        public static let currency: UInt32 = 5, version: UInt32 = 6
    }
    public static let responseCart: UInt32 = 1

    static func cartResponse(_ cart: Cart) -> [UInt8] {
        cartResponse(storeUID: cart.storeUID, lines: cart.lines, subtotal: cart.subtotal, itemCount: cart.itemCount,
                     currency: cart.currency, version: cart.version)
    }

    /// A cart's answer from its parts: a shard writes its lines straight
    /// from the stored lines and their products, without a `Cart`.
    @inlinable
    static func cartResponse<L: CartLineFields>(storeUID: String, lines: [L], subtotal: Money, itemCount: UInt32,
                                                currency: String, version: UInt64) -> [UInt8] {
        cartResponse(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount, currency: currency,
                     version: version, frame: nil)
    }

    /// The body alone, or with `frame` the whole OK response frame around
    /// it (one allocation of the exact size, the body written in place).
    @inlinable
    static func cartResponse<L: CartLineFields>(storeUID: String, lines: [L], subtotal: Money, itemCount: UInt32,
                                                currency: String, version: UInt64,
                                                frame: (id: UInt64, field: MethodField)?) -> [UInt8] {
        // Each line's size is measured once, kept for its header (measured
        // again there, it was a tenth of a 20-line cart-add's instructions).
        lines.withUnsafeBufferPointer { lines in withUnsafeTemporaryAllocation(of: Int.self, capacity: lines.count) { sizes in
            var cartSize = stringFieldSize(CartField.storeUID, storeUID)
            for i in lines.indices {
                sizes[i] = size(lines[i])
                cartSize += messageFieldSize(CartField.lines, sizes[i])
            }
            cartSize += messageFieldSize(CartField.subtotal, moneySize(subtotal.minorUnits, subtotal.currency))
            cartSize += ProtoWriter.varintFieldSize(CartField.itemCount, UInt64(itemCount))
            cartSize += stringFieldSize(CartField.currency, currency)
            cartSize += ProtoWriter.varintFieldSize(CartField.version, version)
            let bodySize = ProtoWriter.lengthDelimitedFieldSize(responseCart, cartSize)
            let total = frame.map { ResponseFrameWriter.okFrameSize(id: $0.id, field: $0.field, bodyLength: bodySize) } ?? bodySize
            return [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
                var w = Cursor(buffer.baseAddress!)
                if let frame {
                    w.written = ResponseFrameWriter.writeOKHeader(id: frame.id, field: frame.field, bodyLength: bodySize,
                                                                  into: UnsafeMutableRawPointer(buffer.baseAddress!))
                }
                w.header(responseCart, cartSize)
                w.string(CartField.storeUID, storeUID)
                for i in lines.indices { write(lines[i], size: sizes[i], &w) }
                writeMoney(CartField.subtotal, subtotal.minorUnits, subtotal.currency, &w)
                w.varintField(CartField.itemCount, UInt64(itemCount))
                w.string(CartField.currency, currency)
                w.varintField(CartField.version, version)
                precondition(w.written == total, "CartBodyWriter: \(w.written) bytes written, \(total) sized")
                count = total
            }
        } }
    }

    /// Writes into a buffer sized beforehand by the `size` functions.
    public struct Cursor {
        public let base: UnsafeMutablePointer<UInt8>
        public var written = 0
        @inlinable public init(_ base: UnsafeMutablePointer<UInt8>) { self.base = base }

        @inlinable @inline(__always)
        public mutating func varint(_ value: UInt64) {
            written = ProtoWriter.putVarint(value, into: UnsafeMutableRawPointer(base), at: written)
        }
        @inlinable @inline(__always)
        public mutating func header(_ field: UInt32, _ length: Int) {
            varint(UInt64(field << 3 | ProtoWriter.wireLengthDelimited))
            varint(UInt64(length))
        }
        @inlinable @inline(__always)
        public mutating func varintField(_ field: UInt32, _ value: UInt64) {
            guard value != 0 else { return }
            varint(UInt64(field << 3 | ProtoWriter.wireVarint))
            varint(value)
        }
        @inlinable
        public mutating func string(_ field: UInt32, _ s: String) {
            // Read in place: `withUTF8` needs a mutable copy of the string
            // (a retain and a release for each of an answer's strings).
            let done: Void? = s.utf8.withContiguousStorageIfAvailable { utf8 in bytes(field, utf8) }
            if done == nil {
                var copy = s
                copy.withUTF8 { bytes(field, $0) }
            }
        }
        /// `bytes` for a few bytes (a currency code): copied in a loop, not
        /// by a call to memcpy.
        @inlinable @inline(__always)
        public mutating func shortBytes(_ field: UInt32, _ utf8: UnsafeBufferPointer<UInt8>) {
            guard utf8.count > 0 else { return }
            guard utf8.count <= 8 else { return bytes(field, utf8) }
            header(field, utf8.count)
            for i in 0..<utf8.count { base[written + i] = utf8[i] }
            written += utf8.count
        }
        @inlinable @inline(__always)
        public mutating func bytes(_ field: UInt32, _ utf8: UnsafeBufferPointer<UInt8>) {
            guard utf8.count > 0 else { return }
            header(field, utf8.count)
            (base + written).update(from: utf8.baseAddress!, count: utf8.count)
            written += utf8.count
        }
    }

    // MARK: Sizes (of the message's own bytes, without its tag and length)

    @inlinable
    public static func stringFieldSize(_ field: UInt32, _ s: String) -> Int {
        let n = s.utf8.count
        return n == 0 ? 0 : ProtoWriter.lengthDelimitedFieldSize(field, n)
    }

    @inlinable
    static func messageFieldSize(_ field: UInt32, _ size: Int) -> Int {
        ProtoWriter.lengthDelimitedFieldSize(field, size)
    }

    @inlinable
    static func moneySize(_ minorUnits: Int64, _ currency: String) -> Int {
        ProtoWriter.varintFieldSize(MoneyField.minorUnits, UInt64(bitPattern: minorUnits))
            + stringFieldSize(MoneyField.currency, currency)
    }

    @inlinable
    static func size<L: CartLineFields>(_ l: borrowing L) -> Int {
        var n = stringFieldSize(LineField.productUID, l.productUID) + stringFieldSize(LineField.name, l.name)
        n += messageFieldSize(LineField.unitPrice, moneySize(l.unitPriceMinorUnits, l.unitPriceCurrency))
        n += ProtoWriter.varintFieldSize(LineField.quantity, UInt64(l.quantity))
        n += messageFieldSize(LineField.lineTotal, moneySize(l.lineTotalMinorUnits, l.lineTotalCurrency))
        n += ProtoWriter.varintFieldSize(LineField.priceChanged, l.priceChanged ? 1 : 0)
        if let p = l.previousPriceMinorUnits { n += messageFieldSize(LineField.previousPrice, moneySize(p, l.previousPriceCurrency)) }
        n += ProtoWriter.varintFieldSize(LineField.outOfStock, l.outOfStock ? 1 : 0)
        return n
    }

    // MARK: Writing

    @inlinable
    static func writeMoney(_ field: UInt32, _ minorUnits: Int64, _ currency: String, _ w: inout Cursor) {
        w.header(field, moneySize(minorUnits, currency))
        w.varintField(MoneyField.minorUnits, UInt64(bitPattern: minorUnits))
        w.string(MoneyField.currency, currency)
    }

    @inlinable
    static func write<L: CartLineFields>(_ l: borrowing L, size: Int, _ w: inout Cursor) {
        w.header(CartField.lines, size)
        w.string(LineField.productUID, l.productUID)
        w.string(LineField.name, l.name)
        writeMoney(LineField.unitPrice, l.unitPriceMinorUnits, l.unitPriceCurrency, &w)
        w.varintField(LineField.quantity, UInt64(l.quantity))
        writeMoney(LineField.lineTotal, l.lineTotalMinorUnits, l.lineTotalCurrency, &w)
        w.varintField(LineField.priceChanged, l.priceChanged ? 1 : 0)
        if let p = l.previousPriceMinorUnits { writeMoney(LineField.previousPrice, p, l.previousPriceCurrency, &w) }
        w.varintField(LineField.outOfStock, l.outOfStock ? 1 : 0)
    }
}

/// What the cart writer reads of a line: a `CartLine`, or a line a shard
/// shows straight from its stored record and product (no `CartLine` built,
/// whose strings were retained and released one by one).
public protocol CartLineFields {
    var productUID: String { get }
    var name: String { get }
    var unitPriceMinorUnits: Int64 { get }
    var unitPriceCurrency: String { get }
    var quantity: UInt32 { get }
    var lineTotalMinorUnits: Int64 { get }
    var lineTotalCurrency: String { get }
    var priceChanged: Bool { get }
    /// nil: no previous price is shown.
    var previousPriceMinorUnits: Int64? { get }
    var previousPriceCurrency: String { get }
    var outOfStock: Bool { get }
}

extension CartLine: CartLineFields {
    public var unitPriceMinorUnits: Int64 { unitPrice.minorUnits }
    public var unitPriceCurrency: String { unitPrice.currency }
    public var lineTotalMinorUnits: Int64 { lineTotal.minorUnits }
    public var lineTotalCurrency: String { lineTotal.currency }
    public var previousPriceMinorUnits: Int64? { previousPrice?.minorUnits }
    public var previousPriceCurrency: String { previousPrice?.currency ?? "" }
}
