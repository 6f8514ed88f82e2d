import CGroserProto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CProtobufC

// protobuf-c memory, and the catalog model's conversions to and from C.
// Encoding builds C structs in an `Arena` freed before returning; decoding
// unpacks, copies into Swift values and frees in a `defer` in the same scope.
// Every ProtobufC*.swift file converts its area's messages this way, and no C
// pointer leaves their functions (ProtoReflection, which reads the
// descriptors, and RequestFieldCount, which walks them, import CGroserProto too).

/// Owns every C allocation of one encode; frees them all at the end.
final class Arena {
    private var blocks: [UnsafeMutableRawPointer] = []

    deinit { for b in blocks { free(b) } }

    func message<T>(_ type: T.Type, _ initialize: (UnsafeMutablePointer<T>) -> Void) -> UnsafeMutablePointer<T> {
        let raw = calloc(1, MemoryLayout<T>.stride)!
        blocks.append(raw)
        let p = raw.bindMemory(to: T.self, capacity: 1)
        initialize(p)
        return p
    }

    /// `body` with `p`, one of this arena's messages, as a ProtobufCMessage.
    /// The arena (every string and submessage `p` points to) lives at least
    /// until `body` returns.
    func withMessage<T, R>(_ p: UnsafeMutablePointer<T>, _ body: (UnsafePointer<ProtobufCMessage>) -> R) -> R {
        withExtendedLifetime(self) {
            UnsafeRawPointer(p).withMemoryRebound(to: ProtobufCMessage.self, capacity: 1) { body($0) }
        }
    }

    func string(_ s: String) -> UnsafeMutablePointer<CChar> {
        let p = strdup(s)!
        blocks.append(UnsafeMutableRawPointer(p))
        return p
    }

    func array<T>(_ items: [T]) -> UnsafeMutablePointer<T?> where T: _Pointer {
        let raw = calloc(max(items.count, 1), MemoryLayout<T?>.stride)!
        blocks.append(raw)
        let p = raw.bindMemory(to: T?.self, capacity: max(items.count, 1))
        for (i, item) in items.enumerated() { p[i] = item }
        return p
    }
}

extension Arena {
    /// The encoding of the message `build` makes in a new arena.
    static func packed<T>(_ build: (Arena) -> UnsafeMutablePointer<T>) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(build(arena), pack)
    }
}

func pack(_ message: UnsafePointer<ProtobufCMessage>) -> [UInt8] {
    let size = protobuf_c_message_get_packed_size(message)
    return [UInt8](unsafeUninitializedCapacity: max(size, 1)) { buffer, count in
        count = protobuf_c_message_pack(message, buffer.baseAddress!)
    }
}


func str(_ p: UnsafeMutablePointer<CChar>?) -> String {
    guard let p else { return "" }
    return String(cString: p)
}

func items<T>(_ p: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ n: Int) -> [UnsafeMutablePointer<T>] {
    guard let p, n > 0 else { return [] }
    return (0..<n).compactMap { p[$0] }
}

// MARK: - Catalog model <-> C

extension Arena {
    func money(_ m: Money) -> UnsafeMutablePointer<Groser__V1__Money> {
        message(Groser__V1__Money.self) { p in
            groser__v1__money__init(p)
            p.pointee.minor_units = m.minorUnits
            p.pointee.currency = string(m.currency)
        }
    }

    func product(_ v: Product) -> UnsafeMutablePointer<Groser__V1__Product> {
        message(Groser__V1__Product.self) { p in
            groser__v1__product__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.name = string(v.name)
            p.pointee.brand = string(v.brand)
            p.pointee.unit = string(v.unit)
            p.pointee.unit_size = v.unitSize
            p.pointee.price = money(v.price)
            p.pointee.image_url = string(v.imageURL)
            p.pointee.out_of_stock = v.outOfStock ? 1 : 0
            p.pointee.often_out_of_stock = v.oftenOutOfStock ? 1 : 0
            p.pointee.shelf_uid = string(v.shelfUID)
        }
    }

    func shelf(_ v: Shelf) -> UnsafeMutablePointer<Groser__V1__Shelf> {
        message(Groser__V1__Shelf.self) { p in
            groser__v1__shelf__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.name = string(v.name)
            p.pointee.product_count = v.productCount
            p.pointee.n_products = v.products.count
            p.pointee.products = array(v.products.map(product))
        }
    }

    func department(_ v: Department) -> UnsafeMutablePointer<Groser__V1__Department> {
        message(Groser__V1__Department.self) { p in
            groser__v1__department__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.name = string(v.name)
            p.pointee.n_shelves = v.shelves.count
            p.pointee.shelves = array(v.shelves.map(shelf))
        }
    }

    func storeSummary(_ v: StoreSummary) -> UnsafeMutablePointer<Groser__V1__StoreSummary> {
        message(Groser__V1__StoreSummary.self) { p in
            groser__v1__store_summary__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.name = string(v.name)
            p.pointee.chain = string(v.chain)
            p.pointee.address = string(v.address)
            p.pointee.city_uid = string(v.cityUID)
        }
    }

    func store(_ v: Store) -> UnsafeMutablePointer<Groser__V1__Store> {
        message(Groser__V1__Store.self) { p in
            groser__v1__store__init(p)
            p.pointee.summary = storeSummary(v.summary)
            p.pointee.n_departments = v.departments.count
            p.pointee.departments = array(v.departments.map(department))
        }
    }

    func city(_ v: City) -> UnsafeMutablePointer<Groser__V1__City> {
        message(Groser__V1__City.self) { p in
            groser__v1__city__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.code = string(v.code)
            p.pointee.name = string(v.name)
            p.pointee.n_stores = v.stores.count
            p.pointee.stores = array(v.stores.map(storeSummary))
            p.pointee.default_store_uid = string(v.defaultStoreUID)
        }
    }
}

func money(_ p: UnsafeMutablePointer<Groser__V1__Money>?) -> Money {
    guard let p else { return Money(minorUnits: 0, currency: "") }
    return Money(minorUnits: p.pointee.minor_units, currency: str(p.pointee.currency))
}

func product(_ p: UnsafeMutablePointer<Groser__V1__Product>?) -> Product {
    guard let c = p?.pointee else {
        return Product(uid: "", name: "", brand: "", unit: "", unitSize: 0, price: money(nil), imageURL: "",
                       outOfStock: false, oftenOutOfStock: false, shelfUID: "")
    }
    return Product(uid: str(c.uid), name: str(c.name), brand: str(c.brand), unit: str(c.unit),
                   unitSize: c.unit_size, price: money(c.price), imageURL: str(c.image_url),
                   outOfStock: c.out_of_stock != 0, oftenOutOfStock: c.often_out_of_stock != 0,
                   shelfUID: str(c.shelf_uid))
}

func shelf(_ p: UnsafeMutablePointer<Groser__V1__Shelf>?) -> Shelf {
    guard let c = p?.pointee else { return Shelf(uid: "", name: "", productCount: 0) }
    return Shelf(uid: str(c.uid), name: str(c.name), productCount: c.product_count,
                 products: items(c.products, c.n_products).map(product))
}

func department(_ p: UnsafeMutablePointer<Groser__V1__Department>) -> Department {
    let c = p.pointee
    return Department(uid: str(c.uid), name: str(c.name), shelves: items(c.shelves, c.n_shelves).map(shelf))
}

func storeSummary(_ p: UnsafeMutablePointer<Groser__V1__StoreSummary>?) -> StoreSummary {
    guard let c = p?.pointee else { return StoreSummary(uid: "", name: "", chain: "", address: "", cityUID: "") }
    return StoreSummary(uid: str(c.uid), name: str(c.name), chain: str(c.chain),
                        address: str(c.address), cityUID: str(c.city_uid))
}

func store(_ p: UnsafeMutablePointer<Groser__V1__Store>?) -> Store {
    guard let c = p?.pointee else { return Store(summary: storeSummary(nil), departments: []) }
    return Store(summary: storeSummary(c.summary), departments: items(c.departments, c.n_departments).map(department))
}

func city(_ p: UnsafeMutablePointer<Groser__V1__City>?) -> City {
    guard let c = p?.pointee else { return City(uid: "", code: "", name: "", stores: [], defaultStoreUID: "") }
    return City(uid: str(c.uid), code: str(c.code), name: str(c.name),
                stores: items(c.stores, c.n_stores).map(storeSummary), defaultStoreUID: str(c.default_store_uid))
}
