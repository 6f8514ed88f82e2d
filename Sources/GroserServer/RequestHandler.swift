import GroserSystem
import GroserWire

/// The catalog reader: answers the catalog's read methods from the
/// encoded catalog, a function of (request, state) with no I/O, so tests
/// call it directly (through the `Dispatcher`) and the socket layer only
/// moves bytes.
public struct RequestHandler: Sendable {
    let catalog: EncodedCatalog
    let startedAtNanoseconds: UInt64
    /// The largest answer body: what the daemon's frame maximum lets a
    /// client expect (`--max-frame-bytes`).
    let maximumAnswerBytes: Int

    public init(catalog: EncodedCatalog, startedAtNanoseconds: UInt64, maximumAnswerBytes: Int = Framing.defaultMaximumFrameBytes) {
        self.catalog = catalog
        self.startedAtNanoseconds = startedAtNanoseconds
        self.maximumAnswerBytes = maximumAnswerBytes
    }

    /// The request in a frame's body, or nil with its refusal appended to
    /// `out`. A frame naming a method only operators may call (PROTOCOL.md
    /// §8), from a peer that is not one, is refused with PERMISSION_DENIED
    /// from its envelope's keys, before it is unpacked: unpacking a 4 MiB
    /// ImportCatalog of empty records takes protobuf-c over 200 MB. Only an
    /// operator's frame gets ImportCatalog's raised field limit.
    public static func decode(frame body: UnsafeRawBufferPointer, peerIsOperator: () -> Bool,
                              into out: inout [UInt8]) -> Request? {
        let envelope = Request.envelope(of: body)
        var fromOperator = false
        if let method = envelope.method, method.info.access == .operators {
            fromOperator = peerIsOperator()
            guard fromOperator || envelope.id == 0 else {
                ResponseFrameWriter.appendStatus(id: envelope.id, status: Status(
                    .permissionDenied, "Only groserd's own user, root or an admin group member may call \(method.info.name)."), to: &out)
                return nil
            }
        }
        do {
            return try Request.decode(body, fromOperator: fromOperator)
        } catch {
            // Refused unread, like a malformed frame: id 0 (PROTOCOL.md §2, §11).
            let message = error.tooManyFields
                ? "The request has more than \(Request.fieldLimit(for: body, fromOperator: fromOperator)) fields (unknown and repeated ones count); groserd does not read it."
                : "The frame is not a valid groser.v1.Request message."
            ResponseFrameWriter.appendStatus(id: 0, status: Status(.invalidArgument, message), to: &out)
            return nil
        }
    }

    /// Answers a catalog read (the registry's `catalogReader` methods), or
    /// UNIMPLEMENTED for a method this server does not know. The
    /// `Dispatcher` calls it once the request's id and deadline passed.
    func answerCatalog(_ request: Request, into out: inout [UInt8]) {
        switch request.method {
        case .serverInfo:
            let uptime = (monotonicNanoseconds() &- startedAtNanoseconds) / 1_000_000
            // Protobuf merges concatenated encodings, so the fields that change
            // per answer follow the body encoded once (written after it, not
            // appended to a copy of it).
            catalog.serverInfoStaticBody.withUnsafeBytes { body in
                ResponseFrameWriter.appendOK(id: request.id, field: .serverInfo, body: body,
                                             appendingVarintFields: (FieldNumbers.ServerInfoResponse.uptimeMilliseconds, uptime),
                                             (FieldNumbers.ServerInfoResponse.catalogVersion, catalog.version), to: &out)
            }

        case .listCities:
            catalog.listCitiesBody.withUnsafeBytes { body in
                ResponseFrameWriter.appendOK(id: request.id, field: .listCities, body: body,
                                             appendingVarintField: FieldNumbers.ListCitiesResponse.catalogVersion, value: catalog.version, to: &out)
            }

        case .getStore(let selector, let includeProducts, let known):
            guard let store = store(for: selector, method: "GetStore", request.id, &out) else { return }
            if known != 0 && known == store.version {
                notModified(request.id, .getStore, versionFields: (FieldNumbers.GetStoreResponse.catalogVersion, FieldNumbers.GetStoreResponse.storeVersion),
                            notModifiedField: FieldNumbers.GetStoreResponse.notModified, store: store, &out)
            } else if includeProducts {
                answerStoreWithProducts(request.id, store, &out)
            } else {
                store.summaryBody.withUnsafeBytes { body in
                    ResponseFrameWriter.appendOK(id: request.id, field: .getStore, body: body,
                                                 appendingVarintFields: (FieldNumbers.GetStoreResponse.catalogVersion, catalog.version),
                                                 (FieldNumbers.GetStoreResponse.storeVersion, store.version), to: &out)
                }
            }

        case .getShelf(let uid, let known):
            guard !uid.isEmpty else {
                fail(request.id, .invalidArgument, "GetShelf's shelf_uid is empty.", &out)
                return
            }
            guard let location = catalog.location(ofShelf: uid), let store = catalog.stores[location.storeUID] else {
                fail(request.id, .notFound, "No shelf has the uid \"\(printable(uid))\".", &out)
                return
            }
            answerShelf(request.id, store.shelf(at: location), location, store, notModified: known != 0 && known == store.version, &out)

        case .listProducts(let page):
            answerProducts(request.id, page, &out)

        case .searchProducts(let search):
            answerSearch(request.id, search, &out)

        case .listStores(let city):
            answerStores(request.id, city, &out)

        case .getProducts(let r):
            answerProductsByUID(request.id, r, &out)

        default:
            fail(request.id, .unimplemented, "The request carries no method this server knows (protocol v\(ProtocolInfo.version)).", &out)
        }
    }

    /// The store a selector names (a city's default store), or nil with
    /// the refusal appended.
    func store(for selector: StoreSelector?, method: String, _ id: UInt64, _ out: inout [UInt8]) -> StoreSegments? {
        let storeUID: String?
        switch selector {
        case nil:
            fail(id, .invalidArgument, "\(method) needs one of city_code, city_uid or store_uid.", &out)
            return nil
        case .cityCode(let code):
            guard let uid = defaultStore(of: .code(code), possessive: "\(method)'s", id, &out) else { return nil }
            storeUID = uid
        case .cityUID(let uid):
            guard let uid = defaultStore(of: .uid(uid), possessive: "\(method)'s", id, &out) else { return nil }
            storeUID = uid
        case .storeUID(let uid):
            guard !uid.isEmpty else {
                fail(id, .invalidArgument, "\(method)'s store_uid is empty.", &out)
                return nil
            }
            storeUID = uid
        }
        guard let uid = storeUID, let store = catalog.stores[uid] else {
            fail(id, .notFound, "No store has the uid \"\(printable(storeUID ?? ""))\".", &out)
            return nil
        }
        return store
    }

    /// The uid of `city`'s default store; nil once the refusal is in `out`
    /// (an empty code or uid, named after `possessive`, or an unknown city).
    func defaultStore(of city: CitySelector, possessive: String, _ id: UInt64, _ out: inout [UInt8]) -> String? {
        switch city {
        case .code(let code):
            guard !code.isEmpty else {
                fail(id, .invalidArgument, "\(possessive) city_code is empty.", &out)
                return nil
            }
            guard let uid = catalog.defaultStoreByCityCode[code.uppercased()] else {
                fail(id, .notFound, "No city has the code \"\(printable(code))\"; ListCities lists the codes.", &out)
                return nil
            }
            return uid
        case .uid(let uid):
            guard !uid.isEmpty else {
                fail(id, .invalidArgument, "\(possessive) city_uid is empty.", &out)
                return nil
            }
            guard let store = catalog.defaultStoreByCityUID[uid] else {
                fail(id, .notFound, "No city has the uid \"\(printable(uid))\".", &out)
                return nil
            }
            return store
        }
    }

    /// `{…versions, not_modified: true}` and nothing else.
    private func notModified(_ id: UInt64, _ field: MethodField, versionFields: (catalog: UInt32, store: UInt32),
                             notModifiedField: UInt32, store: StoreSegments, prefix: [UInt8] = [], _ out: inout [UInt8]) {
        var body = prefix
        ProtoWriter.appendVarintField(versionFields.catalog, catalog.version, to: &body)
        ProtoWriter.appendVarintField(versionFields.store, store.version, to: &body)
        ProtoWriter.appendVarintField(notModifiedField, 1, to: &body)
        ResponseFrameWriter.appendOK(id: id, field: field, body: body, to: &out)
    }

    /// GetStore with every shelf's products, assembled from the shelves'
    /// segments; refused when it would not fit in one frame.
    private func answerStoreWithProducts(_ id: UInt64, _ store: StoreSegments, _ out: inout [UInt8]) {
        let storeSize = store.storeMessageSize
        let bodyLength = ProtoWriter.lengthDelimitedFieldSize(FieldNumbers.GetStoreResponse.store, storeSize) + store.cityField.count
            + ProtoWriter.varintFieldSize(FieldNumbers.GetStoreResponse.catalogVersion, catalog.version)
            + ProtoWriter.varintFieldSize(FieldNumbers.GetStoreResponse.storeVersion, store.version)
        let frameSize = ResponseFrameWriter.okFrameSize(id: id, field: .getStore, bodyLength: bodyLength)
        guard frameSize - Framing.headerSize <= maximumAnswerBytes else {
            fail(id, .resourceExhausted, "The store \(printable(store.uid)) with its \(store.productCount) products takes \(frameSize) bytes, "
                 + "more than the \(maximumAnswerBytes)-byte frame maximum; page through its products with ListProducts "
                 + "(GetStore without include_products gives the rest).", &out)
            return
        }
        ResponseFrameWriter.appendOKHeader(id: id, field: .getStore, bodyLength: bodyLength, to: &out)
        ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.GetStoreResponse.store, storeSize, to: &out)
        store.appendStoreMessage(to: &out)
        out.append(contentsOf: store.cityField)
        ProtoWriter.appendVarintField(FieldNumbers.GetStoreResponse.catalogVersion, catalog.version, to: &out)
        ProtoWriter.appendVarintField(FieldNumbers.GetStoreResponse.storeVersion, store.version, to: &out)
    }

    private func answerShelf(_ id: UInt64, _ shelf: ShelfSegment, _ location: ShelfLocation, _ store: StoreSegments,
                             notModified: Bool, _ out: inout [UInt8]) {
        var tail: [UInt8] = []
        for (number, text) in [(FieldNumbers.GetShelfResponse.storeUID, location.storeUID), (FieldNumbers.GetShelfResponse.departmentUID, location.departmentUID)] {
            let bytes = Array(text.utf8)
            ProtoWriter.appendLengthDelimitedHeader(number, bytes.count, to: &tail)
            tail.append(contentsOf: bytes)
        }
        if notModified {
            self.notModified(id, .getShelf, versionFields: (FieldNumbers.GetShelfResponse.catalogVersion, FieldNumbers.GetShelfResponse.storeVersion),
                             notModifiedField: FieldNumbers.GetShelfResponse.notModified, store: store, prefix: tail, &out)
            return
        }
        ProtoWriter.appendVarintField(FieldNumbers.GetShelfResponse.catalogVersion, catalog.version, to: &tail)
        ProtoWriter.appendVarintField(FieldNumbers.GetShelfResponse.storeVersion, store.version, to: &tail)
        let bodyLength = ProtoWriter.lengthDelimitedFieldSize(FieldNumbers.GetShelfResponse.shelf, shelf.message.count) + tail.count
        ResponseFrameWriter.appendOKHeader(id: id, field: .getShelf, bodyLength: bodyLength, to: &out)
        ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.GetShelfResponse.shelf, shelf.message.count, to: &out)
        out.append(contentsOf: shelf.message)
        out.append(contentsOf: tail)
    }

    /// One page of ListProducts: the products' encodings copied from the
    /// shelves' segments, as many as `page_size` and the frame allow.
    private func answerProducts(_ id: UInt64, _ request: ProductPageRequest, _ out: inout [UInt8]) {
        guard !request.storeUID.isEmpty else {
            fail(id, .invalidArgument, "ListProducts needs a store_uid.", &out)
            return
        }
        guard let store = catalog.stores[request.storeUID] else {
            fail(id, .notFound, "No store has the uid \"\(printable(request.storeUID))\".", &out)
            return
        }
        // The products to page through: the whole store, or one of its shelves.
        var range = 0..<store.productCount
        if !request.shelfUID.isEmpty {
            guard let location = location(ofShelf: request.shelfUID, in: store, storeShown: printable(store.uid), id, &out) else { return }
            let start = store.shelfStarts[store.flatIndex(of: location)]
            range = start..<(start + store.shelf(at: location).productCount)
        }
        var offset = range.lowerBound
        if !request.pageToken.isEmpty {
            switch PageToken.read(request.pageToken, storeUID: store.uid, shelfUID: request.shelfUID) {
            case .forged:
                fail(id, .invalidArgument, "The page token is not one this groserd gave out for this store and shelf; start again with an empty page_token.", &out)
                return
            case .valid(let layout, let at):
                guard layout == store.layoutVersion else {
                    fail(id, .failedPrecondition, "The store's list of products changed since this page token was made; start again with an empty page_token.", &out)
                    return
                }
                guard range.contains(at) || at == range.upperBound else {
                    fail(id, .invalidArgument, "The page token points outside the store's products; start again with an empty page_token.", &out)
                    return
                }
                offset = at
            }
        }
        let pageSize = request.pageSize == 0 ? PageToken.defaultPageSize : min(Int(request.pageSize), PageToken.maximumPageSize)
        // Room for the rest of the answer: a token, the versions and the count.
        let budget = maximumAnswerBytes - 512
        var products: [UInt8] = []
        var end = offset
        store.forEachProduct(from: offset, upTo: min(range.upperBound, offset + pageSize)) { shelf, r in
            let size = ProtoWriter.lengthDelimitedFieldSize(FieldNumbers.ListProductsResponse.products, Int(r.count))
            guard products.count + size <= budget || end == offset else { return false }
            ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.ListProductsResponse.products, Int(r.count), to: &products)
            shelf.message.withUnsafeBytes { raw in
                products.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[Int(r.start)..<Int(r.start + r.count)]))
            }
            end += 1
            return true
        }
        var tail: [UInt8] = []
        if end < range.upperBound {
            let token = Array(PageToken.make(storeUID: store.uid, shelfUID: request.shelfUID,
                                             layoutVersion: store.layoutVersion, offset: end).utf8)
            ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.ListProductsResponse.nextPageToken, token.count, to: &tail)
            tail.append(contentsOf: token)
        }
        ProtoWriter.appendVarintField(FieldNumbers.ListProductsResponse.storeVersion, store.version, to: &tail)
        ProtoWriter.appendVarintField(FieldNumbers.ListProductsResponse.totalSize, UInt64(range.count), to: &tail)
        ResponseFrameWriter.appendOKHeader(id: id, field: .listProducts, bodyLength: products.count + tail.count, to: &out)
        out.append(contentsOf: products)
        out.append(contentsOf: tail)
    }

    func fail(_ id: UInt64, _ code: StatusCode, _ message: String, _ out: inout [UInt8]) {
        ResponseFrameWriter.appendStatus(id: id, status: Status(code, message), to: &out)
    }

    /// A client-supplied string cut to a length fit for one error sentence.
    func printable(_ s: String) -> String { Self.printable(s) }

    static func printable(_ s: String) -> String {
        s.count <= 64 ? s : String(s.prefix(64)) + "…"
    }
}
