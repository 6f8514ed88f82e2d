import GroserWire
import Testing

/// A seeded generator, so a failure reproduces.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

@Suite("the allocation-free request reader agrees with protobuf-c")
struct RequestFastPathTests {
    static let common: [Request] = [
        Request(id: 1, method: .serverInfo),
        Request(id: 1 << 50, deadlineMilliseconds: 250, method: .listCities),
        Request(id: 7, method: .getStore(selector: .cityCode("SPB"), includeProducts: false)),
        Request(id: 8, method: .getStore(selector: .cityUID("city-msk"), includeProducts: true)),
        Request(id: 9, method: .getStore(selector: .storeUID("store-spb-2"), includeProducts: true)),
        Request(id: 10, method: .getStore(selector: .cityCode("Санкт-Петербург"), includeProducts: false)),
        Request(id: 11, method: .getStore(selector: nil, includeProducts: true)),
        Request(id: 0, method: .getShelf(shelfUID: "shf-spb-1-01-1")),
        Request(id: UInt64.max >> 8, deadlineMilliseconds: UInt32.max, method: .getShelf(shelfUID: "")),
        Request(id: 12, method: .addItem(CartMutation(session: "0123456789abcdef0123456789abcdef", storeUID: "store-spb-1"),
                                         productUID: "prd-spb-1-17", quantity: 1)),
        Request(id: 13, deadlineMilliseconds: 500, method: .addItem(
            CartMutation(session: "s", storeUID: "store-spb-1", idempotencyKey: "k-1", expectedVersion: UInt64.max),
            productUID: "Молоко", quantity: UInt32.max)),
        Request(id: 14, method: .setQuantity(CartMutation(session: "s", storeUID: ""), productUID: "p", quantity: 0)),
        Request(id: 15, method: .setQuantity(CartMutation(session: "", storeUID: "", idempotencyKey: "ключ", expectedVersion: 3),
                                             productUID: "", quantity: 128)),
    ]

    @Test(arguments: common)
    func readsWhatProtobufCEncodes(request: Request) throws {
        let bytes = request.encoded()
        let fast = bytes.withUnsafeBytes { Request.decodeCommonMethod($0) }
        #expect(fast == request)
        #expect(try Request.decode(bytes) == request)
    }

    @Test func refusesWhatItDoesNotKnowAndNeverDisagrees() throws {
        // Field 99 (a method from the future), a repeated id, two methods, a NUL in a string.
        let refused: [[UInt8]] = [
            [0x08, 0x09, 0x9a, 0x06, 0x00],
            [0x08, 0x01, 0x08, 0x02, 0x52, 0x00],
            [0x52, 0x00, 0x5a, 0x00],
            [0x62, 0x05, 0x0a, 0x03, 0x53, 0x00, 0x42],
            [],
        ]
        for bytes in refused {
            #expect(bytes.withUnsafeBytes { Request.decodeCommonMethod($0) } == nil, "\(bytes)")
        }
    }

    @Test func randomBytesNearValidRequestsNeverDisagree() throws {
        var rng = SplitMix(state: 0x67_726f_7365_72)
        var read = 0, readCart = 0
        // One connection's memory of its repeated strings, across every round:
        // an answer from memory must be the request's own string.
        var strings = RepeatedStrings()
        for round in 0..<20_000 {
            var bytes = Self.randomRequestBytes(&rng)
            if round % 2 == 1 { Self.mutate(&bytes, &rng) }
            let remembered = bytes.withUnsafeBytes { Request.decodeCommonMethod($0, reusing: &strings) }
            #expect(remembered == bytes.withUnsafeBytes { Request.decodeCommonMethod($0) }, "bytes \(bytes)")
            guard let fast = bytes.withUnsafeBytes({ Request.decodeCommonMethod($0) }) else { continue }
            read += 1
            switch fast.method { case .addItem, .setQuantity: readCart += 1; default: break }
            let slow = try? Request.decode(bytes)
            #expect(slow == fast, "bytes \(bytes)")
        }
        #expect(read > 5_000, "the fast path reads most valid requests")
        #expect(readCart > 1_000, "AddItem and SetQuantity among them: \(readCart)")
    }

    /// Fields of a Request in random order, some left out, some odd.
    static func randomRequestBytes(_ rng: inout SplitMix) -> [UInt8] {
        var fields: [[UInt8]] = []
        if Bool.random(using: &rng) { fields.append([0x08] + varint(UInt64.random(in: 0...UInt64.max >> UInt64.random(in: 0...63, using: &rng), using: &rng))) }
        if Bool.random(using: &rng) { fields.append([0x10] + varint(UInt64.random(in: 0...(1 << 36), using: &rng))) }
        let pool: [[UInt8]] = [Array("SPB".utf8), Array("spb".utf8), [], Array("Москва".utf8), [0xff, 0xfe], Array("shf-1".utf8)]
        func text() -> [UInt8] { pool[Int.random(in: 0..<pool.count, using: &rng)] }
        func stringField(_ number: Int) -> [UInt8] {
            let s = text()
            return [UInt8(number << 3 | 2)] + varint(UInt64(s.count)) + s
        }
        switch Int.random(in: 0..<7, using: &rng) {
        case 0: fields.append([0x52, 0x00])
        case 1: fields.append([0x5a, 0x00])
        case 2:
            var inner: [[UInt8]] = []
            if Bool.random(using: &rng) {
                let s = text()
                inner.append([UInt8(Int.random(in: 1...3, using: &rng) << 3 | 2)] + varint(UInt64(s.count)) + s)
            }
            if Bool.random(using: &rng) { inner.append([0x20, UInt8.random(in: 0...2, using: &rng)]) }
            inner.shuffle(using: &rng)
            let body = inner.flatMap { $0 }
            fields.append([0x62] + varint(UInt64(body.count)) + body)
        case 3:
            let s = text()
            let body = [0x0a] + varint(UInt64(s.count)) + s
            fields.append([0x6a] + varint(UInt64(body.count)) + body)
        case 4, 5:
            // AddItem (16) or SetQuantity (17): a cart mutation, a product, a quantity.
            var mutation: [[UInt8]] = []
            for n in 1...3 where Bool.random(using: &rng) { mutation.append(stringField(n)) }
            if Bool.random(using: &rng) { mutation.append([0x20] + varint(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))) }
            mutation.shuffle(using: &rng)
            let m = mutation.flatMap { $0 }
            var inner: [[UInt8]] = []
            if Int.random(in: 0..<8, using: &rng) > 0 { inner.append([0x0a] + varint(UInt64(m.count)) + m) }
            if Bool.random(using: &rng) { inner.append(stringField(2)) }
            if Bool.random(using: &rng) { inner.append([0x18] + varint(UInt64.random(in: 0...(1 << 33), using: &rng) >> UInt64.random(in: 0...33, using: &rng))) }
            inner.shuffle(using: &rng)
            let body = inner.flatMap { $0 }
            fields.append([0x82 + (Int.random(in: 4...5, using: &rng) == 5 ? 8 : 0), 0x01] + varint(UInt64(body.count)) + body)
        default:
            break
        }
        fields.shuffle(using: &rng)
        return fields.flatMap { $0 }
    }

    static func mutate(_ bytes: inout [UInt8], _ rng: inout SplitMix) {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0 where !bytes.isEmpty: bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
        case 1 where !bytes.isEmpty: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
        case 2: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
        default: bytes += bytes  // every field twice
        }
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        ProtoWriter.appendVarint(value, to: &out)
        return out
    }
}
