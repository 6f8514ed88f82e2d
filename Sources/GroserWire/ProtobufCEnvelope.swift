import CGroserProto
import CProtobufC

// The envelopes (Request and Response) through protobuf-c: the dispatch from
// a method's field to its area's conversion (ProtobufC<Area>.swift). Each
// dispatch names every method of the registry, so a new one cannot compile
// until it says how its messages convert.

extension Request {
    /// The request's Protobuf encoding (without the frame's length prefix).
    public func encoded() -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__Request.self) { p in
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
                case .getStore, .getShelf, .listProducts:
                    _ = arena.catalogMethod(method, into: p)
                case .importCatalog(let chunk):
                    p.pointee.method_case = GROSER__V1__REQUEST__METHOD_IMPORT_CATALOG
                    p.pointee.import_catalog = arena.importRequest(chunk)
                case .exportCatalog(let r):
                    p.pointee.method_case = GROSER__V1__REQUEST__METHOD_EXPORT_CATALOG
                    p.pointee.export_catalog = arena.exportRequest(r)
                case .openSession, .getCart, .addItem, .setQuantity, .removeItem, .clearCart, .checkout, .listOrders, .setProduct:
                    _ = arena.commerceMethod(method, into: p)
                case .register, .login, .logout, .whoAmI:
                    _ = arena.accountMethod(method, into: p)
                case .watch, .cancelWatch, .stats:
                    _ = arena.watchMethod(method, into: p)
                case .searchProducts:
                    _ = arena.searchMethod(method, into: p)
                case .listStores:
                    _ = arena.listStoresMethod(method, into: p)
                case .unknown:
                    break
                }
            }
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
        // The oneof's case is the method's field number (0: none set).
        let method: RequestMethod? = switch MethodField(rawValue: c.method_case.rawValue) {
        case nil: .unknown
        case .serverInfo?: .serverInfo
        case .listCities?: .listCities
        case .getStore?, .getShelf?, .listProducts?: decodeCatalogMethod(c)
        case .importCatalog?, .exportCatalog?: decodeImportMethod(c)
        case .openSession?, .getCart?, .addItem?, .setQuantity?, .removeItem?, .clearCart?, .checkout?, .listOrders?,
             .setProduct?:
            decodeCommerceMethod(c)
        case .register?, .login?, .logout?, .whoAmI?: decodeAccountMethod(c)
        case .watch?, .cancelWatch?, .stats?: decodeWatchMethod(c)
        case .searchProducts?: decodeSearchMethod(c)
        case .listStores?: decodeListStoresMethod(c)
        }
        return Request(id: c.id, deadlineMilliseconds: c.deadline_ms, method: method ?? .unknown)
    }

    /// Reads a Request from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Request {
        try withContiguousBytes(bytes) { (raw) throws(WireDecodingError) in try decode(raw) }
    }
}

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
        // The oneof's case is the method's field number (0: no body).
        let body: ResponseBody? = switch MethodField(rawValue: c.body_case.rawValue) {
        case nil: ResponseBody.none
        case .serverInfo?, .listCities?, .getStore?, .getShelf?, .listProducts?: decodeCatalogBody(c)
        case .importCatalog?, .exportCatalog?: decodeImportBody(c)
        case .openSession?, .getCart?, .addItem?, .setQuantity?, .removeItem?, .clearCart?, .checkout?, .listOrders?,
             .setProduct?:
            decodeCommerceBody(c)
        case .register?, .login?, .logout?, .whoAmI?: decodeAccountBody(c)
        case .watch?, .cancelWatch?, .stats?: decodeWatchBody(c)
        case .searchProducts?: decodeSearchBody(c)
        case .listStores?: decodeListStoresBody(c)
        }
        return Response(id: c.id, status: status, body: body ?? .none, continues: c.continues != 0)
    }

    /// Reads a Response from a frame's body.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WireDecodingError) -> Response {
        try withContiguousBytes(bytes) { (raw) throws(WireDecodingError) in try decode(raw) }
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

/// `body` with `bytes` as one contiguous buffer (copied only when they are not).
private func withContiguousBytes<T>(_ bytes: some Collection<UInt8>,
                                    _ body: (UnsafeRawBufferPointer) throws(WireDecodingError) -> T) throws(WireDecodingError) -> T {
    let result = bytes.withContiguousStorageIfAvailable { raw in
        Result { () throws(WireDecodingError) -> T in try body(UnsafeRawBufferPointer(raw)) }
    } ?? Array(bytes).withUnsafeBytes { raw in
        Result { () throws(WireDecodingError) -> T in try body(raw) }
    }
    return try result.get()
}
