import CGroserProto
import CProtobufC

// `BodyEncoder`, and the encodings of the catalog model's messages the
// encoded catalog keeps (Product, Shelf, City, ...): groserd writes most
// catalog answers by hand from these (EncodedCatalog).

// MARK: - Response bodies

/// Encodes response bodies (the message inside `Response.body`) with
/// protobuf-c: the regular methods' in Generated/Methods.swift, the others in
/// their area's file.
public enum BodyEncoder {
    /// One product's encoding (a `Product` message), as catalog segments keep it.
    public static func product(_ v: Product) -> [UInt8] {
        Arena.packed { $0.product(v) }
    }

    /// A `StoreSummary` message.
    public static func storeSummary(_ v: StoreSummary) -> [UInt8] {
        Arena.packed { $0.storeSummary(v) }
    }

    /// A `City` message.
    public static func city(_ v: City) -> [UInt8] {
        Arena.packed { $0.city(v) }
    }

    /// A `Department` message.
    public static func department(_ v: Department) -> [UInt8] {
        Arena.packed { $0.department(v) }
    }

    /// One shelf's encoding (a `Shelf` message, products included).
    public static func shelf(_ v: Shelf) -> [UInt8] {
        Arena.packed { $0.shelf(v) }
    }
}
