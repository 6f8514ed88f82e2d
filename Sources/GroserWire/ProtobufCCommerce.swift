import CGroserProto
import CProtobufC

// The cart's body, which CartBodyWriter writes without protobuf-c (checked
// against the protobuf-c encoding), and a remembered Login's answer read
// back. Like ProtobufC.swift, no C pointer leaves this file's functions.

extension BodyEncoder {
    /// The CartResponse body (the same message for GetCart and every mutation).
    public static func cart(_ v: Cart) -> [UInt8] { CartBodyWriter.cartResponse(v) }

    /// The same body from a cart's parts, its lines in any `CartLineFields`
    /// form: the bytes `cart(_:)` writes for the `Cart` of those parts.
    @inlinable
    public static func cart<L: CartLineFields>(storeUID: String, lines: [L], subtotal: Money, itemCount: UInt32,
                                               currency: String, version: UInt64) -> [UInt8] {
        CartBodyWriter.cartResponse(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount,
                                    currency: currency, version: version)
    }

    /// The whole OK response frame (request `id`, method `field`) around
    /// that body, in one allocation: for an answer that goes out alone.
    @inlinable
    public static func cartFrame<L: CartLineFields>(id: UInt64, field: MethodField, storeUID: String, lines: [L], subtotal: Money,
                                                    itemCount: UInt32, currency: String, version: UInt64) -> [UInt8] {
        CartBodyWriter.cartResponse(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount,
                                    currency: currency, version: version, frame: (id, field))
    }

    /// The same body through protobuf-c: what `cart(_:)` is checked against.
    static func cartThroughProtobufC(_ v: Cart) -> [UInt8] { Arena.packed { $0.cartResponse(CartResponse(cart: v)) } }

    /// A LoginResponse body read back (a remembered login's answer); nil when
    /// the bytes are not one.
    public static func decodeLogin(_ body: [UInt8]) -> LoginResult? {
        body.withUnsafeBufferPointer { b in
            guard let p = groser__v1__login_response__unpack(nil, b.count, b.baseAddress) else { return nil }
            defer { groser__v1__login_response__free_unpacked(p, nil) }
            return LoginResult(p)
        }
    }
}
