/// The first fields of a cart answer's line, encoded once per product: a
/// customer shard keeps each product's uid, name and unit price as the
/// bytes a CartLine starts with (`head(productUID:name:unitPrice:currency:)`,
/// held by its `ProductSlot`), so that writing a line (`SlottedCartAnswer`)
/// costs a copy of those bytes and a few numbers, with no String touched.
/// The bytes are the ones `CartBodyWriter` writes for the same fields
/// (`CartAnswerTests`).
public enum EncodedCartLine {
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
                                                moneySize(unitPrice, currencyField), to: &out)
        ProtoWriter.appendVarintField(CartBodyWriter.MoneyField.minorUnits, UInt64(bitPattern: unitPrice), to: &out)
        if !currency.isEmpty {
            ProtoWriter.appendLengthDelimitedHeader(CartBodyWriter.MoneyField.currency, currency.utf8.count, to: &out)
            out.append(contentsOf: currency.utf8)
        }
        return out
    }

    /// A Money message's size, its currency field `currencyField` bytes
    /// (`currencyFieldSize`).
    @inlinable
    public static func moneySize(_ minorUnits: Int64, _ currencyField: Int) -> Int {
        ProtoWriter.varintFieldSize(CartBodyWriter.MoneyField.minorUnits, UInt64(bitPattern: minorUnits)) + currencyField
    }
}
