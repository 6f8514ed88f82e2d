import GroserWire

/// GetProducts: products of one store by uid from the encoded catalog, each
/// copied whole from its shelf's segment (as GetShelf sends it), found
/// through the store's uid index.
extension RequestHandler {
    /// The most uids one request may ask for.
    static let maximumProductUIDs = 200

    func answerProductsByUID(_ id: UInt64, _ request: GetProductsRequest, _ out: inout [UInt8]) {
        guard !request.storeUID.isEmpty else {
            return fail(id, .invalidArgument, "GetProducts needs a store_uid.", &out)
        }
        guard request.productUIDs.count <= Self.maximumProductUIDs else {
            return fail(id, .invalidArgument, "GetProducts takes at most \(Self.maximumProductUIDs) product_uids; this request has \(request.productUIDs.count).", &out)
        }
        guard let store = catalog.stores[request.storeUID] else {
            return fail(id, .notFound, "No store has the uid \"\(printable(request.storeUID))\".", &out)
        }
        typealias Field = FieldNumbers.GetProductsResponse
        var body: [UInt8] = []
        var missing: [UInt8] = []
        var answered: Set<String> = []
        for uid in request.productUIDs where answered.insert(uid).inserted {
            let found = store.products.candidates(for: uid).lazy.compactMap { position -> (ShelfSegment, ShelfSegment.ProductRange)? in
                guard let place = store.place(ofProduct: Int(position)) else { return nil }
                let range = place.shelf.productRanges[place.index]
                return ProductIndex.product(place.shelf, range, hasUID: uid) ? (place.shelf, range) : nil
            }.first
            guard let (shelf, r) = found else {
                ProtoWriter.appendLengthDelimitedHeader(Field.missingUIDs, uid.utf8.count, to: &missing)
                missing += uid.utf8
                continue
            }
            ProtoWriter.appendLengthDelimitedHeader(Field.products, Int(r.count), to: &body)
            shelf.message.withUnsafeBytes { raw in
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[Int(r.start)..<Int(r.start + r.count)]))
            }
        }
        body += missing
        ProtoWriter.appendVarintField(Field.storeVersion, store.version, to: &body)
        ProtoWriter.appendVarintField(Field.catalogVersion, catalog.version, to: &body)
        // 200 products fit the default frame maximum many times over; a
        // server run with a small --max-frame-bytes says so instead of
        // sending a frame its clients refuse.
        guard body.count + 64 <= maximumAnswerBytes else {
            return fail(id, .resourceExhausted, "The \(request.productUIDs.count) products asked for take \(body.count) bytes, more than this server's answer maximum of \(maximumAnswerBytes); ask for fewer at a time.", &out)
        }
        ResponseFrameWriter.appendOK(id: id, field: .getProducts, body: body, to: &out)
    }
}
