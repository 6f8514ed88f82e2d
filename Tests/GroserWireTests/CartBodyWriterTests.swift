@testable import GroserWire
import GroserSystem
import Testing

/// The cart answer is written by hand (CartBodyWriter) for speed; protobuf-c
/// is the reference: the same bytes for every cart, and a client decoding
/// them gets the cart back.
@Suite("cart body writer")
struct CartBodyWriterTests {

    // No NUL: protobuf-c's C strings end there, the catalog refuses control
    // characters in names and uids, and the daemon makes the uids it serves.
    static let strings = ["", "prd-spb-1-17", "Молоко «Домик в деревне» 3,2% — 🥛", "牛奶 北海道 1L", "a\tb", String(repeating: "x", count: 200)]
    static let amounts: [Int64] = [0, 1, 127, 128, 8990, -1, Int64.max, Int64.min]
    static let currencies = ["", "RUB", "JPY"]

    static func money(_ g: inout SplitMix64) -> Money {
        Money(minorUnits: g.pick(amounts), currency: g.pick(currencies))
    }

    static func cart(_ g: inout SplitMix64) -> Cart {
        let lines = (0..<Int(g.next() % 4)).map { _ in
            CartLine(productUID: g.pick(strings), name: g.pick(strings), unitPrice: money(&g),
                     quantity: g.pick([0, 1, 127, 128, UInt32.max]), lineTotal: money(&g),
                     priceChanged: g.next() % 2 == 0, previousPrice: g.next() % 2 == 0 ? money(&g) : nil,
                     outOfStock: g.next() % 2 == 0)
        }
        return Cart(storeUID: g.pick(strings), lines: lines, subtotal: money(&g),
                    itemCount: g.pick([0, 1, 300, UInt32.max]), currency: g.pick(currencies),
                    version: g.pick([0, 1, 128, UInt64.max]))
    }

    @Test func writesTheBytesProtobufCWritesForEveryCart() {
        for seed in UInt64(0)..<2000 {
            var g = SplitMix64(seed: seed)
            let c = Self.cart(&g)
            let fast = BodyEncoder.cart(c), reference = BodyEncoder.cartThroughProtobufC(c)
            #expect(fast == reference, "seed \(seed): \(c)")
            if fast != reference { return }
        }
    }

    @Test func aClientDecodesTheCartBack() throws {
        var g = SplitMix64(seed: 42)
        for id in UInt64(1)...50 {
            let c = Self.cart(&g)
            var frame: [UInt8] = []
            BodyEncoder.cart(c).withUnsafeBytes { ResponseFrameWriter.appendOK(id: id, field: .addItem, body: $0, to: &frame) }
            let decoded = try Response.decode(frame[Framing.headerSize...])
            #expect(decoded.id == id)
            #expect(decoded.body == .cart(c), "\(c)")
        }
    }
}
