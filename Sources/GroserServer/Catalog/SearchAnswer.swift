import GroserSearch
import GroserWire

/// SearchProducts (docs/SEARCH.md): the store's index ranks its products;
/// each hit's Product is copied from the shelf segment of the catalog
/// version answering, so prices and stock are current.
extension RequestHandler {
    static let defaultSearchPageSize = 20
    static let maximumSearchPageSize = 100
    /// Longer queries are refused: nobody types 200 characters into a search box.
    static let maximumQueryCharacters = 200

    func answerSearch(_ id: UInt64, _ request: SearchRequest, _ out: inout [UInt8]) {
        guard let store = store(for: request.selector, method: "SearchProducts", id, &out) else { return }
        let characters = request.query.count
        guard characters <= Self.maximumQueryCharacters else {
            fail(id, .invalidArgument, "The query has \(characters) characters; SearchProducts reads at most \(Self.maximumQueryCharacters).", &out)
            return
        }
        guard request.query.contains(where: { !$0.isWhitespace }) else {
            fail(id, .invalidArgument, "SearchProducts' query is empty; type at least one letter or digit.", &out)
            return
        }
        guard !Tokenizer.tokens(request.query, keepParts: false).isEmpty else {
            fail(id, .invalidArgument, "The query has no letters or digits to search for.", &out)
            return
        }
        guard request.departmentUID.isEmpty || request.shelfUID.isEmpty else {
            fail(id, .invalidArgument, "SearchProducts takes a department_uid or a shelf_uid, not both.", &out)
            return
        }
        let index = store.search
        let outOfStock = store.outOfStock
        // The products searched: the store's, a department's or a shelf's.
        var range: Range<UInt32>?
        if !request.shelfUID.isEmpty {
            guard let location = location(ofShelf: request.shelfUID, in: store, storeShown: store.uid, id, &out) else { return }
            range = index.products(ofShelf: store.flatIndex(of: location))
        } else if !request.departmentUID.isEmpty {
            var first = 0
            var found: Range<Int>?
            for d in store.departments {
                if d.uid == request.departmentUID { found = first..<(first + d.shelves.count); break }
                first += d.shelves.count
            }
            guard let shelves = found else {
                fail(id, .notFound, "The store \(store.uid) has no department with the uid \"\(printable(request.departmentUID))\".", &out)
                return
            }
            range = index.products(ofShelves: shelves)
        }
        // The page token binds the query and its filters, so a token cannot
        // page through another search.
        let tokenKey = "search\u{0}\(request.query)\u{0}\(request.inStockOnly ? 1 : 0)\u{0}\(request.departmentUID)\u{0}\(request.shelfUID)\u{0}\(request.groupByShelf ? 1 : 0)"
        var offset = 0
        if !request.pageToken.isEmpty {
            switch PageToken.read(request.pageToken, storeUID: store.uid, shelfUID: tokenKey) {
            case .forged:
                fail(id, .invalidArgument, "The page token is not one this groserd gave out for this store and query; start again with an empty page_token.", &out)
                return
            case .valid(let layout, let at):
                guard layout == store.layoutVersion else {
                    fail(id, .failedPrecondition, "The store's list of products changed since this page token was made; search again with an empty page_token.", &out)
                    return
                }
                offset = at
            }
        }
        let pageSize = request.pageSize == 0 ? Self.defaultSearchPageSize : min(Int(request.pageSize), Self.maximumSearchPageSize)
        let outcome = SearchStemmers.pool.with { stemmer in
            index.search(request.query, filter: SearchFilter(inStockOnly: request.inStockOnly, products: range),
                         limit: offset + pageSize, stemmer: stemmer) { product in outOfStock[Int(product)] }
        }
        var hits = Array(outcome.hits.dropFirst(offset))
        if request.groupByShelf {
            // Shelves in the order of their best hit; rank order within one.
            var order: [Int: Int] = [:]
            for h in hits where order[index.shelfPosition(ofProduct: h.product)] == nil {
                order[index.shelfPosition(ofProduct: h.product)] = order.count
            }
            hits = hits.enumerated().sorted { a, b in
                let sa = order[index.shelfPosition(ofProduct: a.element.product)]!, sb = order[index.shelfPosition(ofProduct: b.element.product)]!
                return sa != sb ? sa < sb : a.offset < b.offset
            }.map(\.element)
        }
        var body: [UInt8] = []
        for hit in hits {
            appendHit(hit, store: store, index: index, outcome: outcome, to: &body)
        }
        let end = offset + hits.count
        ProtoWriter.appendVarintField(FieldNumbers.SearchProductsResponse.totalEstimate, UInt64(outcome.total), to: &body)
        if end < outcome.total {
            appendString(FieldNumbers.SearchProductsResponse.nextPageToken, PageToken.make(storeUID: store.uid, shelfUID: tokenKey, layoutVersion: store.layoutVersion, offset: end), to: &body)
        }
        appendString(FieldNumbers.SearchProductsResponse.queryUsed, outcome.queryUsed, to: &body)
        if outcome.layoutSwitched { ProtoWriter.appendVarintField(FieldNumbers.SearchProductsResponse.layoutSwitched, 1, to: &body) }
        appendString(FieldNumbers.SearchProductsResponse.storeUID, store.uid, to: &body)
        ProtoWriter.appendVarintField(FieldNumbers.SearchProductsResponse.storeVersion, store.version, to: &body)
        ResponseFrameWriter.appendOK(id: id, field: .searchProducts, body: body, to: &out)
    }

    /// One SearchHit: the product's encoding copied from its segment, the
    /// highlights, the matched word count and where the product is.
    private func appendHit(_ hit: SearchOutcome.Hit, store: StoreSegments, index: SearchIndex, outcome: SearchOutcome,
                           to body: inout [UInt8]) {
        guard let place = store.place(ofProduct: Int(hit.product)) else { return }
        let shelf = place.shelf
        let r = shelf.productRanges[place.index]
        var hitBody: [UInt8] = []
        shelf.message.withUnsafeBytes { raw in
            let product = UnsafeRawBufferPointer(rebasing: raw[Int(r.start)..<Int(r.start + r.count)])
            ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.SearchHit.product, product.count, to: &hitBody)
            hitBody.append(contentsOf: product)
            let name = Self.productName(product)
            for h in index.highlights(in: name, for: outcome) {
                var range: [UInt8] = []
                ProtoWriter.appendVarintField(FieldNumbers.TextRange.start, UInt64(h.lowerBound), to: &range)
                ProtoWriter.appendVarintField(FieldNumbers.TextRange.length, UInt64(h.count), to: &range)
                ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.SearchHit.highlights, range.count, to: &hitBody)
                hitBody.append(contentsOf: range)
            }
        }
        ProtoWriter.appendVarintField(FieldNumbers.SearchHit.matchedWords, UInt64(hit.matchedWords), to: &hitBody)
        appendString(FieldNumbers.SearchHit.shelfName, shelf.name, to: &hitBody)
        appendString(FieldNumbers.SearchHit.departmentUID, place.department.uid, to: &hitBody)
        appendString(FieldNumbers.SearchHit.departmentName, place.department.name, to: &hitBody)
        ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.SearchProductsResponse.hits, hitBody.count, to: &body)
        body.append(contentsOf: hitBody)
    }

    private func appendString(_ field: UInt32, _ text: String, to out: inout [UInt8]) {
        guard !text.isEmpty else { return }
        let bytes = Array(text.utf8)
        ProtoWriter.appendLengthDelimitedHeader(field, bytes.count, to: &out)
        out.append(contentsOf: bytes)
    }

    /// Product.name from a Product message groserd encoded; empty when the
    /// message has none (or is cut short).
    static func productName(_ message: UnsafeRawBufferPointer) -> String {
        var reader = WireReader(message)
        while !reader.atEnd, let key = reader.varint() {
            if key == UInt64(FieldNumbers.Product.name) << 3 | UInt64(ProtoWriter.wireLengthDelimited) {
                return reader.lengthDelimited().map { String(decoding: $0, as: UTF8.self) } ?? ""
            }
            guard reader.skip(wireType: key & 7) else { return "" }
        }
        return ""
    }
}
