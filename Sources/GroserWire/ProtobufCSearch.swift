import CGroserProto
import CProtobufC

// protobuf-c conversion of SearchProducts. Like ProtobufC.swift, no C
// pointer leaves this file's functions. groserd writes its answers by hand
// (ProtoWriter, products copied from the catalog's segments);
// `BodyEncoder.searchProducts` is the reference encoding tests compare with.

extension Arena {
    /// Fills the request's method for SearchProducts; false for others.
    func searchMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        guard case .searchProducts(let r) = method else { return false }
        p.pointee.method_case = GROSER__V1__REQUEST__METHOD_SEARCH_PRODUCTS
        p.pointee.search_products = message(Groser__V1__SearchProductsRequest.self) { g in
            groser__v1__search_products_request__init(g)
            switch r.selector {
            case .cityCode(let s)?:
                g.pointee.selector_case = GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_CITY_CODE
                g.pointee.city_code = string(s)
            case .cityUID(let s)?:
                g.pointee.selector_case = GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_CITY_UID
                g.pointee.city_uid = string(s)
            case .storeUID(let s)?:
                g.pointee.selector_case = GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_STORE_UID
                g.pointee.store_uid = string(s)
            case nil:
                break
            }
            g.pointee.query = string(r.query)
            g.pointee.page_size = r.pageSize
            g.pointee.page_token = string(r.pageToken)
            g.pointee.in_stock_only = r.inStockOnly ? 1 : 0
            g.pointee.department_uid = string(r.departmentUID)
            g.pointee.shelf_uid = string(r.shelfUID)
            g.pointee.group_by_shelf = r.groupByShelf ? 1 : 0
        }
        return true
    }

    func searchHit(_ v: SearchHit) -> UnsafeMutablePointer<Groser__V1__SearchHit> {
        message(Groser__V1__SearchHit.self) { h in
            groser__v1__search_hit__init(h)
            h.pointee.product = product(v.product)
            h.pointee.n_highlights = v.highlights.count
            h.pointee.highlights = array(v.highlights.map { r in
                message(Groser__V1__TextRange.self) { t in
                    groser__v1__text_range__init(t)
                    t.pointee.start = r.start
                    t.pointee.length = r.length
                }
            })
            h.pointee.matched_words = v.matchedWords
            h.pointee.shelf_name = string(v.shelfName)
            h.pointee.department_uid = string(v.departmentUID)
            h.pointee.department_name = string(v.departmentName)
        }
    }
}

/// SearchProducts of an unpacked request, or nil for another method.
func decodeSearchMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    guard c.method_case == GROSER__V1__REQUEST__METHOD_SEARCH_PRODUCTS else { return nil }
    let g = c.search_products.pointee
    let selector: StoreSelector?
    switch g.selector_case {
    case GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_CITY_CODE: selector = .cityCode(str(g.city_code))
    case GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_CITY_UID: selector = .cityUID(str(g.city_uid))
    case GROSER__V1__SEARCH_PRODUCTS_REQUEST__SELECTOR_STORE_UID: selector = .storeUID(str(g.store_uid))
    default: selector = nil
    }
    return .searchProducts(SearchRequest(
        selector: selector, query: str(g.query), pageSize: g.page_size, pageToken: str(g.page_token),
        inStockOnly: g.in_stock_only != 0, departmentUID: str(g.department_uid), shelfUID: str(g.shelf_uid),
        groupByShelf: g.group_by_shelf != 0))
}

/// The SearchProducts body of an unpacked response, or nil for another body.
func decodeSearchBody(_ c: Groser__V1__Response) -> ResponseBody? {
    guard c.body_case == GROSER__V1__RESPONSE__BODY_SEARCH_PRODUCTS else { return nil }
    let b = c.search_products.pointee
    let hits = items(b.hits, b.n_hits).map { h -> SearchHit in
        let v = h.pointee
        return SearchHit(product: product(v.product),
                         highlights: items(v.highlights, v.n_highlights).map { TextRange(start: $0.pointee.start, length: $0.pointee.length) },
                         matchedWords: v.matched_words, shelfName: str(v.shelf_name), departmentUID: str(v.department_uid),
                         departmentName: str(v.department_name))
    }
    return .searchProducts(SearchResults(hits: hits, totalEstimate: b.total_estimate, nextPageToken: str(b.next_page_token),
                                         queryUsed: str(b.query_used), layoutSwitched: b.layout_switched != 0,
                                         storeUID: str(b.store_uid), storeVersion: b.store_version))
}

extension BodyEncoder {
    /// A SearchProductsResponse's encoding.
    public static func searchProducts(_ v: SearchResults) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__SearchProductsResponse.self) { p in
                groser__v1__search_products_response__init(p)
                p.pointee.n_hits = v.hits.count
                p.pointee.hits = arena.array(v.hits.map(arena.searchHit))
                p.pointee.total_estimate = v.totalEstimate
                p.pointee.next_page_token = arena.string(v.nextPageToken)
                p.pointee.query_used = arena.string(v.queryUsed)
                p.pointee.layout_switched = v.layoutSwitched ? 1 : 0
                p.pointee.store_uid = arena.string(v.storeUID)
                p.pointee.store_version = v.storeVersion
            }
        }
    }
}
