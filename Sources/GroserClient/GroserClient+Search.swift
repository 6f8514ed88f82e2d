/// Product search (SearchProducts, docs/SEARCH.md).
extension GroserClient {
    /// One page of ranked products of a store (a city means its default
    /// store) for what a shopper typed. The last word matches as a prefix
    /// unless `query` ends with a space.
    public func search(_ query: String, in selector: StoreSelector, pageSize: UInt32 = 0, pageToken: String = "",
                       inStockOnly: Bool = false, departmentUID: String = "", shelfUID: String = "",
                       groupByShelf: Bool = false, timeout: Double? = nil) throws(GroserError) -> SearchResults {
        try search(SearchRequest(selector: selector, query: query, pageSize: pageSize, pageToken: pageToken,
                                 inStockOnly: inStockOnly, departmentUID: departmentUID, shelfUID: shelfUID,
                                 groupByShelf: groupByShelf), timeout: timeout)
    }

    /// One page of a search, as the request spells it.
    public func search(_ request: SearchRequest, timeout: Double? = nil) throws(GroserError) -> SearchResults {
        guard case .searchProducts(let v) = try call(.searchProducts(request), timeout: timeout) else {
            throw Self.mismatch("SearchProducts")
        }
        return v
    }

    /// One page of a search.
    public func search(_ request: SearchRequest, timeout: Duration? = nil) async throws(GroserError) -> SearchResults {
        try await answer(.searchProducts(request), timeout, "SearchProducts") { if case .searchProducts(let v) = $0 { v } else { nil } }
    }
}
