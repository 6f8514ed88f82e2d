import Glibc

/// A reader for the requests clients send most (ServerInfo, ListCities,
/// GetStore, GetShelf, AddItem and SetQuantity with plain fields), straight
/// from the frame with no allocation but the strings it returns: protobuf-c's unpack mallocs every message and string and
/// costs more than answering from the encoded catalog. It answers nil for
/// anything it is not sure of (another method, an unknown or repeated
/// field, a string with a NUL, a malformed byte), and the caller then uses
/// `Request.decode`, so the two never disagree on a request it reads
/// (tests compare them on random input).
extension Request {
    // Tags (field number << 3 | wire type) of the fields read here.
    private static let idTag: UInt64 = 1 << 3 | 0
    private static let deadlineTag: UInt64 = 2 << 3 | 0
    private static let serverInfoTag: UInt64 = 10 << 3 | 2
    private static let listCitiesTag: UInt64 = 11 << 3 | 2
    private static let getStoreTag: UInt64 = 12 << 3 | 2
    private static let getShelfTag: UInt64 = 13 << 3 | 2
    private static let addItemTag: UInt64 = 16 << 3 | 2
    private static let setQuantityTag: UInt64 = 17 << 3 | 2

    /// The request in `bytes` (a frame's body), or nil: then use `decode`.
    public static func decodeCommonMethod(_ bytes: UnsafeRawBufferPointer) -> Request? {
        var strings = RepeatedStrings()
        return decodeCommonMethod(bytes, reusing: &strings)
    }

    /// `decodeCommonMethod`, reusing the session token and store uid a
    /// connection sent last when the bytes are the same (a String made
    /// from bytes is checked as UTF-8 and, past 15 bytes, allocated: about
    /// 250 instructions each, and a malloc for a token).
    public static func decodeCommonMethod(_ bytes: UnsafeRawBufferPointer, reusing strings: inout RepeatedStrings) -> Request? {
        var reader = WireReader(bytes)
        var id: UInt64 = 0
        var deadline: UInt32 = 0
        // The method's tag and body; decoded once, after the loop (a
        // RequestMethod? held through the loop was copied and destroyed at
        // every step: about 1,000 instructions of ServerInfo's 3,600).
        var methodTag: UInt64 = 0
        var methodBody = UnsafeRawBufferPointer(start: nil, count: 0)
        var seenID = false, seenDeadline = false
        while !reader.atEnd {
            // Every tag read here fits two bytes; a longer one is another field.
            guard let tag = reader.varint(maxBytes: 2) else { return nil }
            switch tag {
            case idTag:
                guard !seenID, let v = reader.varint(maxBytes: 9) else { return nil }
                id = v
                seenID = true
            case deadlineTag:
                guard !seenDeadline, let v = reader.varint(maxBytes: 5) else { return nil }
                deadline = UInt32(truncatingIfNeeded: v)
                seenDeadline = true
            case serverInfoTag, listCitiesTag, getStoreTag, getShelfTag, addItemTag, setQuantityTag:
                guard methodTag == 0, let body = reader.shortField() else { return nil }
                methodTag = tag
                methodBody = body
            default:
                return nil
            }
        }
        let method: RequestMethod
        switch methodTag {
        case serverInfoTag, listCitiesTag:
            guard methodBody.isEmpty else { return nil }
            method = methodTag == serverInfoTag ? .serverInfo : .listCities
        case getStoreTag:
            guard let m = getStore(methodBody) else { return nil }
            method = m
        case getShelfTag:
            guard let m = getShelf(methodBody) else { return nil }
            method = m
        case addItemTag, setQuantityTag:
            guard let item = cartItem(methodBody, &strings) else { return nil }
            method = methodTag == addItemTag
                ? .addItem(item.cart, productUID: item.product, quantity: item.quantity)
                : .setQuantity(item.cart, productUID: item.product, quantity: item.quantity)
        default:
            return nil
        }
        return Request(id: id, deadlineMilliseconds: deadline, method: method)
    }

    private static func getStore(_ bytes: UnsafeRawBufferPointer) -> RequestMethod? {
        var reader = WireReader(bytes)
        var selector: StoreSelector?
        var includeProducts = false
        var seenProducts = false
        var known: UInt64 = 0
        var seenKnown = false
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2, 2 << 3 | 2, 3 << 3 | 2:
                // A second selector, even the same field again, is left to protobuf-c.
                guard selector == nil, let text = reader.string() else { return nil }
                selector = tag == 1 << 3 | 2 ? .cityCode(text) : tag == 2 << 3 | 2 ? .cityUID(text) : .storeUID(text)
            case 4 << 3 | 0:
                guard !seenProducts, let v = reader.varint(maxBytes: 1) else { return nil }
                includeProducts = v != 0
                seenProducts = true
            case 5 << 3 | 0:
                guard !seenKnown, let v = reader.varint(maxBytes: 10) else { return nil }
                known = v
                seenKnown = true
            default:
                return nil
            }
        }
        return .getStore(selector: selector, includeProducts: includeProducts, knownStoreVersion: known)
    }

    /// AddItemRequest and SetQuantityRequest (the same fields); nil without
    /// the cart mutation, which protobuf-c's reading fills in otherwise.
    private static func cartItem(_ bytes: UnsafeRawBufferPointer, _ strings: inout RepeatedStrings) -> (cart: CartMutation, product: String, quantity: UInt32)? {
        var reader = WireReader(bytes)
        var cart: CartMutation?
        var product: String?
        var quantity: UInt32?
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2:
                guard cart == nil, let body = reader.shortField(), let m = cartMutation(body, &strings) else { return nil }
                cart = m
            case 2 << 3 | 2:
                guard product == nil, let text = reader.string() else { return nil }
                product = text
            case 3 << 3 | 0:
                guard quantity == nil, let v = reader.varint(maxBytes: 5), v <= UInt64(UInt32.max) else { return nil }
                quantity = UInt32(v)
            default:
                return nil
            }
        }
        guard let cart else { return nil }
        return (cart, product ?? "", quantity ?? 0)
    }

    private static func cartMutation(_ bytes: UnsafeRawBufferPointer, _ strings: inout RepeatedStrings) -> CartMutation? {
        var reader = WireReader(bytes)
        var session: String?, store: String?, key: String?
        var version: UInt64?
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2:
                guard session == nil, let text = reader.string(reusing: &strings.session) else { return nil }
                session = text
            case 2 << 3 | 2:
                guard store == nil, let text = reader.string(reusing: &strings.store) else { return nil }
                store = text
            case 3 << 3 | 2:
                guard key == nil, let text = reader.string() else { return nil }
                key = text
            case 4 << 3 | 0:
                guard version == nil, let v = reader.varint(maxBytes: 10) else { return nil }
                version = v
            default:
                return nil
            }
        }
        return CartMutation(session: session ?? "", storeUID: store ?? "", idempotencyKey: key ?? "", expectedVersion: version ?? 0)
    }

    private static func getShelf(_ bytes: UnsafeRawBufferPointer) -> RequestMethod? {
        var reader = WireReader(bytes)
        var uid = ""
        var seen = false
        var known: UInt64 = 0
        var seenKnown = false
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1) else { return nil }
            switch tag {
            case 1 << 3 | 2:
                guard !seen, let text = reader.string() else { return nil }
                uid = text
                seen = true
            case 2 << 3 | 0:
                guard !seenKnown, let v = reader.varint(maxBytes: 10) else { return nil }
                known = v
                seenKnown = true
            default:
                return nil
            }
        }
        return .getShelf(shelfUID: uid, knownStoreVersion: known)
    }
}

extension WireReader {
    /// A length-delimited field of the fast path: its length fits three
    /// bytes (any longer is left to protobuf-c). Out of line, with the limit
    /// built in, as the fast path's own reader had it.
    @inline(never)
    fileprivate mutating func shortField() -> UnsafeRawBufferPointer? { lengthDelimited(maxLengthBytes: 3) }

    /// A string field's text; nil when it holds a NUL, which the C strings
    /// of protobuf-c would cut short.
    fileprivate mutating func string() -> String? {
        guard let raw = shortField(), !raw.contains(0) else { return nil }
        return String(decoding: raw, as: UTF8.self)
    }

    /// `string()`, answering `last` itself when its bytes are the field's
    /// (and else remembering the new one there). Only valid UTF-8 is
    /// remembered, so an answer from memory is the string `string()` makes.
    fileprivate mutating func string(reusing last: inout String) -> String? {
        guard let raw = shortField() else { return nil }
        let same = raw.count == last.utf8.count && last.withUTF8 { known in
            raw.count == 0 || memcmp(known.baseAddress!, raw.baseAddress!, raw.count) == 0
        }
        if same { return last }
        guard !raw.contains(0) else { return nil }
        var text = String(decoding: raw, as: UTF8.self)
        if text.utf8.count == raw.count && text.withUTF8({ raw.count == 0 || memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }) {
            last = text
        }
        return text
    }
}

/// The strings a connection sends again and again (its session token, its
/// store's uid), kept by the connection for `decodeCommonMethod(_:reusing:)`.
public struct RepeatedStrings: Sendable {
    var session = ""
    var store = ""
    public init() {}
}
