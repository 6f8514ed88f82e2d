import GroserWire

/// A method the benchmark calls, with its arguments.
public enum BenchMethod: Sendable, Equatable {
    case serverInfo
    case listCities
    case getStore(StoreSelector, includeProducts: Bool)
    case getShelf(uid: String)
    /// AddItem of one unit, each connection in a session of its own; the
    /// product is the store's first in stock unless named.
    case cartAdd(StoreSelector, productUID: String?)
    /// Reads and writes on the same connections: GetStore (without products)
    /// of the store, and for `writePercent` % of the requests the AddItem of
    /// `cartAdd` in the same store.
    case mix(StoreSelector, writePercent: Int, productUID: String?)
    /// SearchProducts (page size 10) of these queries, in turn.
    case search(StoreSelector, queries: [String])

    /// What a run sends, one kind of request after another: the method
    /// itself, or a mix's read (kind 0) and write (kind 1).
    public var kinds: [BenchMethod] {
        switch self {
        case .mix(let selector, _, let product):
            [.getStore(selector, includeProducts: false), .cartAdd(selector, productUID: product)]
        default:
            [self]
        }
    }

    /// The names of `kinds` in the report: none for a single method.
    public var kindNames: [String] {
        if case .mix = self { ["reads", "writes"] } else { [] }
    }

    /// Whether a mix's request number `sequence` on connection `phase` is
    /// a write: exactly `percent` of any 100 consecutive requests are, spread
    /// out, and each connection starts at another point of the cycle so the
    /// connections do not write in step.
    @inline(__always)
    public static func mixSendsWrite(sequence: UInt64, phase: Int, percent: Int) -> Bool {
        let step = (sequence % 100 + UInt64(phase % 100)) % 100
        return step * UInt64(percent) % 100 < UInt64(percent)
    }

    /// The request's method as GroserWire encodes it (cart-add's session,
    /// store and product are filled in per connection by the load generator;
    /// a mix gives its read's).
    public var requestMethod: RequestMethod {
        switch self {
        case .serverInfo: .serverInfo
        case .listCities: .listCities
        case .getStore(let selector, let products): .getStore(selector: selector, includeProducts: products)
        case .getShelf(let uid): .getShelf(shelfUID: uid)
        case .cartAdd(_, let product):
            .addItem(CartMutation(session: "", storeUID: ""), productUID: product ?? "", quantity: 1)
        case .mix:
            kinds[0].requestMethod
        case .search(let selector, let queries):
            .searchProducts(SearchRequest(selector: selector, query: queries.first ?? "", pageSize: 10))
        }
    }

    /// The `Response.body` field an OK answer carries (a mix: its read's).
    public var responseField: MethodField {
        switch self {
        case .serverInfo: .serverInfo
        case .listCities: .listCities
        case .getStore: .getStore
        case .getShelf: .getShelf
        case .cartAdd: .addItem
        case .mix: .getStore
        case .search: .searchProducts
        }
    }

    /// The name on the command line, with its arguments.
    public var label: String {
        switch self {
        case .serverInfo: "info"
        case .listCities: "cities"
        case .getStore(let selector, let products):
            "get-store " + Self.describe(selector) + (products ? " --products" : "")
        case .getShelf(let uid): "shelf \(uid)"
        case .cartAdd(let selector, let product):
            "cart-add " + Self.describe(selector) + (product.map { " --product \($0)" } ?? "")
        case .mix(let selector, let percent, let product):
            "mix " + Self.describe(selector) + " --write-percent \(percent)" + (product.map { " --product \($0)" } ?? "")
        case .search(let selector, let queries):
            "search " + Self.describe(selector) + " (\(queries.count) queries)"
        }
    }

    private static func describe(_ selector: StoreSelector) -> String {
        switch selector {
        case .cityCode(let code): "--city \(code)"
        case .cityUID(let uid): "--city-uid \(uid)"
        case .storeUID(let uid): "--store \(uid)"
        }
    }
}

/// One request frame encoded once, whose id is rewritten in place for each
/// send. The id is written first, as field 1 with an 8-byte varint, followed
/// by protobuf-c's encoding of the rest of the Request (encoded with id 0,
/// which proto3 leaves out); Protobuf accepts fields in any order. Ids are
/// kept in [2^49, 2^56), where every varint is exactly 8 bytes, so patching
/// never changes the frame's length.
public struct RequestFrame: Sendable {
    /// The smallest id; request number `n` of a connection gets `idBase + n`.
    public static let idBase: UInt64 = 1 << 49
    static let idSpan: UInt64 = (1 << 56) - (1 << 49)
    static let idWidth = 8
    /// Where the id's 8 bytes start within the frame (after the length and the tag).
    public static let idOffset = Framing.headerSize + 1

    /// The whole frame, length prefix included.
    public private(set) var bytes: [UInt8]

    public init(method: BenchMethod) {
        self.init(requestMethod: method.requestMethod)
    }

    public init(requestMethod: RequestMethod) {
        let rest = Request(id: 0, method: requestMethod).encoded()
        var body: [UInt8] = [UInt8(1 << 3 | ProtoWriter.wireVarint)]
        body += [UInt8](repeating: 0x80, count: Self.idWidth - 1) + [0]
        body += rest
        bytes = Framing.frame(body)
        Self.writeID(Self.idBase, into: &bytes, at: Self.idOffset)
    }

    /// The id of a connection's request number `sequence`.
    @inline(__always)
    public static func id(sequence: UInt64) -> UInt64 { idBase + sequence % idSpan }

    /// Writes `id` (in [2^49, 2^56)) as an 8-byte varint at `offset`.
    @inline(__always)
    public static func writeID(_ id: UInt64, into buffer: UnsafeMutableRawPointer) {
        var v = id
        for i in 0..<(idWidth - 1) {
            buffer.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: i, as: UInt8.self)
            v >>= 7
        }
        buffer.storeBytes(of: UInt8(truncatingIfNeeded: v), toByteOffset: idWidth - 1, as: UInt8.self)
    }

    static func writeID(_ id: UInt64, into bytes: inout [UInt8], at offset: Int) {
        bytes.withUnsafeMutableBytes { writeID(id, into: $0.baseAddress! + offset) }
    }
}
