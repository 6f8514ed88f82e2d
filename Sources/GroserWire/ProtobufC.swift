import CGroserProto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CProtobufC

// The only file that touches protobuf-c memory. Encoding builds C structs in
// an arena freed before returning; decoding unpacks, copies into Swift values
// and frees in a `defer` in the same scope. No C pointer leaves this file.

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

private func shelf(_ p: UnsafeMutablePointer<Groser__V1__Shelf>?) -> Shelf {
    guard let c = p?.pointee else { return Shelf(uid: "", name: "", productCount: 0) }
    return Shelf(uid: str(c.uid), name: str(c.name), productCount: c.product_count,
                 products: items(c.products, c.n_products).map(product))
}

private func department(_ p: UnsafeMutablePointer<Groser__V1__Department>) -> Department {
    let c = p.pointee
    return Department(uid: str(c.uid), name: str(c.name), shelves: items(c.shelves, c.n_shelves).map(shelf))
}

func storeSummary(_ p: UnsafeMutablePointer<Groser__V1__StoreSummary>?) -> StoreSummary {
    guard let c = p?.pointee else { return StoreSummary(uid: "", name: "", chain: "", address: "", cityUID: "") }
    return StoreSummary(uid: str(c.uid), name: str(c.name), chain: str(c.chain),
                        address: str(c.address), cityUID: str(c.city_uid))
}

private func store(_ p: UnsafeMutablePointer<Groser__V1__Store>?) -> Store {
    guard let c = p?.pointee else { return Store(summary: storeSummary(nil), departments: []) }
    return Store(summary: storeSummary(c.summary), departments: items(c.departments, c.n_departments).map(department))
}

private func city(_ p: UnsafeMutablePointer<Groser__V1__City>?) -> City {
    guard let c = p?.pointee else { return City(uid: "", code: "", name: "", stores: [], defaultStoreUID: "") }
    return City(uid: str(c.uid), code: str(c.code), name: str(c.name),
                stores: items(c.stores, c.n_stores).map(storeSummary), defaultStoreUID: str(c.default_store_uid))
}

// MARK: - Response bodies

/// Encodes response bodies (the message inside `Response.body`) with protobuf-c.
public enum BodyEncoder {
    public static func serverInfo(_ v: ServerInfo) -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__ServerInfoResponse.self) { p in
            groser__v1__server_info_response__init(p)
            p.pointee.server_version = arena.string(v.serverVersion)
            p.pointee.protocol_version = v.protocolVersion
            p.pointee.uptime_ms = v.uptimeMilliseconds
            p.pointee.catalog_version = v.catalogVersion
            p.pointee.n_methods = v.methods.count
            p.pointee.methods = arena.array(v.methods.map(arena.string))
        }
        return arena.withMessage(p, pack)
    }

    public static func listCities(_ v: CityList) -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__ListCitiesResponse.self) { p in
            groser__v1__list_cities_response__init(p)
            p.pointee.n_cities = v.cities.count
            p.pointee.cities = arena.array(v.cities.map(arena.city))
            p.pointee.catalog_version = v.catalogVersion
        }
        return arena.withMessage(p, pack)
    }

    public static func getStore(_ v: StoreCatalog) -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__GetStoreResponse.self) { p in
            groser__v1__get_store_response__init(p)
            if !v.notModified {
                p.pointee.store = arena.store(v.store)
                p.pointee.city = arena.city(v.city)
            }
            p.pointee.catalog_version = v.catalogVersion
            p.pointee.store_version = v.storeVersion
            p.pointee.not_modified = v.notModified ? 1 : 0
        }
        return arena.withMessage(p, pack)
    }

    public static func getShelf(_ v: ShelfContents) -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__GetShelfResponse.self) { p in
            groser__v1__get_shelf_response__init(p)
            if !v.notModified { p.pointee.shelf = arena.shelf(v.shelf) }
            p.pointee.store_uid = arena.string(v.storeUID)
            p.pointee.department_uid = arena.string(v.departmentUID)
            p.pointee.catalog_version = v.catalogVersion
            p.pointee.store_version = v.storeVersion
            p.pointee.not_modified = v.notModified ? 1 : 0
        }
        return arena.withMessage(p, pack)
    }

    public static func listProducts(_ v: ProductPage) -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__ListProductsResponse.self) { p in
            groser__v1__list_products_response__init(p)
            p.pointee.n_products = v.products.count
            p.pointee.products = arena.array(v.products.map(arena.product))
            p.pointee.next_page_token = arena.string(v.nextPageToken)
            p.pointee.store_version = v.storeVersion
            p.pointee.total_size = v.totalSize
        }
        return arena.withMessage(p, pack)
    }

    /// One product's encoding (a `Product` message), as catalog segments keep it.
    public static func product(_ v: Product) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(arena.product(v), pack)
    }

    /// A `StoreSummary` message.
    public static func storeSummary(_ v: StoreSummary) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(arena.storeSummary(v), pack)
    }

    /// A `City` message.
    public static func city(_ v: City) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(arena.city(v), pack)
    }

    /// A `Department` message.
    public static func department(_ v: Department) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(arena.department(v), pack)
    }

    /// One shelf's encoding (a `Shelf` message, products included).
    public static func shelf(_ v: Shelf) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(arena.shelf(v), pack)
    }
}

// MARK: - Requests

extension Request {
    /// The request's Protobuf encoding (without the frame's length prefix).
    public func encoded() -> [UInt8] {
        let arena = Arena()
        let p = arena.message(Groser__V1__Request.self) { p in
            groser__v1__request__init(p)
            p.pointee.id = id
            p.pointee.deadline_ms = deadlineMilliseconds
            switch method {
            case .serverInfo:
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_SERVER_INFO
                p.pointee.server_info = arena.message(Groser__V1__ServerInfoRequest.self) { groser__v1__server_info_request__init($0) }
            case .listCities:
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LIST_CITIES
                p.pointee.list_cities = arena.message(Groser__V1__ListCitiesRequest.self) { groser__v1__list_cities_request__init($0) }
            case .getStore(let selector, let includeProducts, let known):
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_GET_STORE
                p.pointee.get_store = arena.message(Groser__V1__GetStoreRequest.self) { g in
                    groser__v1__get_store_request__init(g)
                    g.pointee.include_products = includeProducts ? 1 : 0
                    g.pointee.known_store_version = known
                    switch selector {
                    case .cityCode(let s)?:
                        g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_CODE
                        g.pointee.city_code = arena.string(s)
                    case .cityUID(let s)?:
                        g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_UID
                        g.pointee.city_uid = arena.string(s)
                    case .storeUID(let s)?:
                        g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_STORE_UID
                        g.pointee.store_uid = arena.string(s)
                    case nil:
                        break
                    }
                }
            case .getShelf(let uid, let known):
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_GET_SHELF
                p.pointee.get_shelf = arena.message(Groser__V1__GetShelfRequest.self) { g in
                    groser__v1__get_shelf_request__init(g)
                    g.pointee.shelf_uid = arena.string(uid)
                    g.pointee.known_store_version = known
                }
            case .listProducts(let r):
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LIST_PRODUCTS
                p.pointee.list_products = arena.message(Groser__V1__ListProductsRequest.self) { g in
                    groser__v1__list_products_request__init(g)
                    g.pointee.store_uid = arena.string(r.storeUID)
                    g.pointee.shelf_uid = arena.string(r.shelfUID)
                    g.pointee.page_size = r.pageSize
                    g.pointee.page_token = arena.string(r.pageToken)
                }
            case .importCatalog(let chunk):
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_IMPORT_CATALOG
                p.pointee.import_catalog = arena.importRequest(chunk)
            case .exportCatalog(let r):
                p.pointee.method_case = GROSER__V1__REQUEST__METHOD_EXPORT_CATALOG
                p.pointee.export_catalog = arena.exportRequest(r)
            case .unknown:
                break
            default:
                if !arena.commerceMethod(method, into: p) && !arena.accountMethod(method, into: p) && !arena.watchMethod(method, into: p)
                    && !arena.searchMethod(method, into: p) {
                    _ = arena.listStoresMethod(method, into: p)
                }
            }
        }
        return arena.withMessage(p, pack)
    }

    /// The most fields a request may have, counted as `fieldCount` counts
    /// them. A v1 request has at most about 15; the rest is room for fields
    /// a newer client adds. Past it a request is refused unread: protobuf-c's
    /// unpack keeps 32 to 64 bytes of scan state for every field of a message
    /// and 24 bytes plus a malloc'd copy for every unknown one, so a 4 MiB
    /// frame of 2-byte fields cost it over 150 MB. Up to the limit, it costs
    /// at most about 256 × 150 bytes besides copies of the frame's bytes.
    public static let maximumFieldCount = 256
    /// An ImportCatalog request may have one field per this many bytes: it
    /// carries thousands of real fields, one per 6 to 11 bytes, and
    /// protobuf-c's cost for them stays a small multiple of the frame's size.
    /// Every other request keeps `maximumFieldCount`.
    public static let importBytesPerField = 4

    /// The most fields the request in `bytes` may have. Only an operator's
    /// ImportCatalog gets the raised limit (`fromOperator`; groserd refuses
    /// anyone else's before unpacking it): anyone else's request, whatever
    /// it names, keeps `maximumFieldCount`.
    public static func fieldLimit(for bytes: UnsafeRawBufferPointer, fromOperator: Bool = true) -> Int {
        fromOperator && isImport(bytes) ? max(maximumFieldCount, bytes.count / importBytesPerField) : maximumFieldCount
    }

    /// True when the envelope's method is ImportCatalog (field 24): a look
    /// at the top-level keys only, allocating nothing.
    static func isImport(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var scan = WireScan(bytes)
        while let field = scan.next() {
            if field.number == 24 && field.payload != nil { return true }
        }
        return false
    }

    /// The fields in a request's encoding as protobuf-c's unpack would scan
    /// them: the envelope's, and inside every field the schema declares as a
    /// message, that message's, at every depth. Unknown fields, and known
    /// ones given more than once, each count; an unknown field's contents are
    /// not looked into (protobuf-c keeps them as bytes). Counting stops once
    /// past `limit`, and at the first malformed byte (protobuf-c then refuses
    /// the frame itself). Reads the frame once, allocating nothing.
    public static func fieldCount(_ bytes: UnsafeRawBufferPointer, stoppingPast limit: Int = maximumFieldCount) -> Int {
        var count = 0
        countFields(bytes, groser_request_descriptor(), depth: 0, limit: limit, into: &count)
        return count
    }

    private static func countFields(_ bytes: UnsafeRawBufferPointer, _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>,
                                    depth: Int, limit: Int, into count: inout Int) {
        var scan = WireScan(bytes)
        while count <= limit, let field = scan.next() {
            count += 1
            // Request messages do not nest themselves; the depth bound
            // only guards against a schema that one day does.
            guard let payload = field.payload, depth < 32, field.number > 0, field.number <= UInt64(UInt32.max),
                  let declared = protobuf_c_message_descriptor_get_field(descriptor, UInt32(field.number)),
                  declared.pointee.type == PROTOBUF_C_TYPE_MESSAGE,
                  let nested = declared.pointee.descriptor else { continue }
            countFields(payload, nested.assumingMemoryBound(to: ProtobufCMessageDescriptor.self),
                        depth: depth + 1, limit: limit, into: &count)
        }
    }

    /// Reads a Request from a frame's body. A request of more than
    /// `fieldLimit(for:fromOperator:)` fields is refused before protobuf-c sees it.
    public static func decode(_ bytes: UnsafeRawBufferPointer, fromOperator: Bool = true) throws(WireDecodingError) -> Request {
        // Every field takes at least 2 bytes (a key and a value or length),
        // so a frame this short cannot have too many: no scan.
        let limit = fieldLimit(for: bytes, fromOperator: fromOperator)
        guard bytes.count <= 2 * limit || fieldCount(bytes, stoppingPast: limit) <= limit else {
            throw WireDecodingError("the request has more than \(limit) fields", tooManyFields: true)
        }
        guard let p = groser__v1__request__unpack(nil, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)) else {
            throw WireDecodingError("the frame is not a valid groser.v1.Request message")
        }
        defer { groser__v1__request__free_unpacked(p, nil) }
        let c = p.pointee
        let method: RequestMethod
        switch c.method_case {
        case GROSER__V1__REQUEST__METHOD_SERVER_INFO: method = .serverInfo
        case GROSER__V1__REQUEST__METHOD_LIST_CITIES: method = .listCities
        case GROSER__V1__REQUEST__METHOD_GET_STORE:
            let g = c.get_store.pointee
            let selector: StoreSelector?
            switch g.selector_case {
            case GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_CODE: selector = .cityCode(str(g.city_code))
            case GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_UID: selector = .cityUID(str(g.city_uid))
            case GROSER__V1__GET_STORE_REQUEST__SELECTOR_STORE_UID: selector = .storeUID(str(g.store_uid))
            default: selector = nil
            }
            method = .getStore(selector: selector, includeProducts: g.include_products != 0,
                               knownStoreVersion: g.known_store_version)
        case GROSER__V1__REQUEST__METHOD_GET_SHELF:
            let g = c.get_shelf.pointee
            method = .getShelf(shelfUID: str(g.shelf_uid), knownStoreVersion: g.known_store_version)
        case GROSER__V1__REQUEST__METHOD_LIST_PRODUCTS:
            let g = c.list_products.pointee
            method = .listProducts(ProductPageRequest(storeUID: str(g.store_uid), shelfUID: str(g.shelf_uid),
                                                      pageSize: g.page_size, pageToken: str(g.page_token)))
        default:
            method = decodeCommerceMethod(c) ?? decodeImportMethod(c) ?? decodeAccountMethod(c) ?? decodeWatchMethod(c)
                ?? decodeSearchMethod(c) ?? decodeListStoresMethod(c) ?? .unknown
        }
        return Request(id: c.id, deadlineMilliseconds: c.deadline_ms, method: method)
    }

    /// Reads a Request from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Request {
        let result = bytes.withContiguousStorageIfAvailable { raw in
            Result { () throws(WireDecodingError) -> Request in try decode(UnsafeRawBufferPointer(raw)) }
        } ?? Array(bytes).withUnsafeBytes { raw in
            Result { () throws(WireDecodingError) -> Request in try decode(raw) }
        }
        return try result.get()
    }
}

// MARK: - Responses

extension Response {
    /// Reads a Response from a frame's body.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(WireDecodingError) -> Response {
        guard let p = groser__v1__response__unpack(nil, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)) else {
            throw WireDecodingError("the frame is not a valid groser.v1.Response message")
        }
        defer { groser__v1__response__free_unpacked(p, nil) }
        let c = p.pointee
        var status = Status.ok
        if let s = c.status?.pointee {
            status = Status(StatusCode(rawValue: Int32(bitPattern: s.code.rawValue)), str(s.message))
        }
        let body: ResponseBody
        switch c.body_case {
        case GROSER__V1__RESPONSE__BODY_SERVER_INFO:
            let b = c.server_info.pointee
            var methods: [String] = []
            if let m = b.methods { for i in 0..<b.n_methods { methods.append(str(m[i])) } }
            body = .serverInfo(ServerInfo(serverVersion: str(b.server_version), protocolVersion: b.protocol_version,
                                          uptimeMilliseconds: b.uptime_ms, catalogVersion: b.catalog_version,
                                          methods: methods))
        case GROSER__V1__RESPONSE__BODY_LIST_CITIES:
            let b = c.list_cities.pointee
            body = .listCities(CityList(cities: items(b.cities, b.n_cities).map(city), catalogVersion: b.catalog_version))
        case GROSER__V1__RESPONSE__BODY_GET_STORE:
            let b = c.get_store.pointee
            body = .getStore(StoreCatalog(store: store(b.store), city: city(b.city), catalogVersion: b.catalog_version,
                                          storeVersion: b.store_version, notModified: b.not_modified != 0))
        case GROSER__V1__RESPONSE__BODY_GET_SHELF:
            let b = c.get_shelf.pointee
            body = .getShelf(ShelfContents(shelf: shelf(b.shelf), storeUID: str(b.store_uid),
                                           departmentUID: str(b.department_uid), catalogVersion: b.catalog_version,
                                           storeVersion: b.store_version, notModified: b.not_modified != 0))
        case GROSER__V1__RESPONSE__BODY_LIST_PRODUCTS:
            let b = c.list_products.pointee
            body = .listProducts(ProductPage(products: items(b.products, b.n_products).map(product),
                                             nextPageToken: str(b.next_page_token), storeVersion: b.store_version,
                                             totalSize: b.total_size))
        default:
            body = decodeCommerceBody(c) ?? decodeImportBody(c) ?? decodeAccountBody(c) ?? decodeWatchBody(c)
                ?? decodeSearchBody(c) ?? decodeListStoresBody(c) ?? .none
        }
        return Response(id: c.id, status: status, body: body, continues: c.continues != 0)
    }

    /// Reads a Response from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Response {
        let result = bytes.withContiguousStorageIfAvailable { raw in
            Result { () throws(WireDecodingError) -> Response in try decode(UnsafeRawBufferPointer(raw)) }
        } ?? Array(bytes).withUnsafeBytes { raw in
            Result { () throws(WireDecodingError) -> Response in try decode(raw) }
        }
        return try result.get()
    }

    /// The whole response frame (length prefix, then the encoding), as the
    /// server writes it: the envelope by hand, the body by protobuf-c.
    public func encodedFrame() -> [UInt8] {
        var out: [UInt8] = []
        switch body {
        case .none: ResponseFrameWriter.appendStatus(id: id, status: status, to: &out)
        case .serverInfo(let v): ResponseFrameWriter.appendOK(id: id, field: .serverInfo, body: BodyEncoder.serverInfo(v), to: &out)
        case .listCities(let v): ResponseFrameWriter.appendOK(id: id, field: .listCities, body: BodyEncoder.listCities(v), to: &out)
        case .getStore(let v): ResponseFrameWriter.appendOK(id: id, field: .getStore, body: BodyEncoder.getStore(v), to: &out)
        case .getShelf(let v): ResponseFrameWriter.appendOK(id: id, field: .getShelf, body: BodyEncoder.getShelf(v), to: &out)
        case .listProducts(let v): ResponseFrameWriter.appendOK(id: id, field: .listProducts, body: BodyEncoder.listProducts(v), to: &out)
        case .importCatalog(let v): ResponseFrameWriter.appendOK(id: id, field: .importCatalog, body: BodyEncoder.importCatalog(v), to: &out)
        case .exportCatalog(let v): ResponseFrameWriter.appendOK(id: id, field: .exportCatalog, body: BodyEncoder.exportCatalog(v), to: &out)
        case .openSession(let v): ResponseFrameWriter.appendOK(id: id, field: .openSession, body: BodyEncoder.openSession(v), to: &out)
        case .cart(let v): ResponseFrameWriter.appendOK(id: id, field: .getCart, body: BodyEncoder.cart(v), to: &out)
        case .checkout(let v): ResponseFrameWriter.appendOK(id: id, field: .checkout, body: BodyEncoder.checkout(v), to: &out)
        case .listOrders(let v): ResponseFrameWriter.appendOK(id: id, field: .listOrders, body: BodyEncoder.listOrders(v), to: &out)
        case .setProduct(let v): ResponseFrameWriter.appendOK(id: id, field: .setProduct, body: BodyEncoder.setProduct(v), to: &out)
        case .register(let v): ResponseFrameWriter.appendOK(id: id, field: .register, body: BodyEncoder.register(v), to: &out)
        case .login(let v): ResponseFrameWriter.appendOK(id: id, field: .login, body: BodyEncoder.login(v), to: &out)
        case .logout: ResponseFrameWriter.appendOK(id: id, field: .logout, body: BodyEncoder.logout(), to: &out)
        case .whoAmI(let v): ResponseFrameWriter.appendOK(id: id, field: .whoAmI, body: BodyEncoder.whoAmI(v), to: &out)
        case .watch(let v):
            BodyEncoder.watchEvent(v).withUnsafeBytes { body in
                ResponseFrameWriter.appendStreamFrame(id: id, field: .watch, body: body, continues: continues, to: &out)
            }
        case .cancelWatch: ResponseFrameWriter.appendOK(id: id, field: .cancelWatch, body: BodyEncoder.cancelWatch(), to: &out)
        case .stats(let v): ResponseFrameWriter.appendOK(id: id, field: .stats, body: BodyEncoder.stats(v), to: &out)
        case .searchProducts(let v):
            ResponseFrameWriter.appendOK(id: id, field: .searchProducts, body: BodyEncoder.searchProducts(v), to: &out)
        case .listStores(let v): ResponseFrameWriter.appendOK(id: id, field: .listStores, body: BodyEncoder.listStores(v), to: &out)
        }
        return out
    }
}

/// The fields of one message's encoding, one at a time, allocating nothing:
/// the number, the wire type and, for length-delimited fields, the bytes.
/// Ends (nil) at the end of the bytes and at the first malformed key, varint
/// or length, where protobuf-c would refuse the frame too.
struct WireScan {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count && shift < 64 {
            let b = bytes[offset]
            offset += 1
            value |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// The next field. A field whose key reads but whose value does not
    /// (or whose wire type is not one protobuf-c reads) is still returned,
    /// as protobuf-c scans it before refusing, and is the last.
    mutating func next() -> (number: UInt64, wireType: UInt64, payload: UnsafeRawBufferPointer?)? {
        guard offset < bytes.count, let key = varint() else { return nil }
        let number = key >> 3, wireType = key & 7
        switch wireType {
        case 0:
            if varint() == nil { offset = bytes.count }
        case 1: offset += 8
        case 5: offset += 4
        case 2:
            guard let length = varint(), length <= UInt64(bytes.count - offset) else {
                offset = bytes.count
                return (number, wireType, nil)
            }
            let start = offset
            offset += Int(length)
            return (number, wireType, UnsafeRawBufferPointer(rebasing: bytes[start..<offset]))
        default:
            offset = bytes.count
        }
        return (number, wireType, nil)
    }
}
