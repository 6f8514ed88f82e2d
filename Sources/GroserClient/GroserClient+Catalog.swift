/// The catalog reads (ServerInfo, ListCities, GetStore, GetShelf, ListStores),
/// blocking and async.
extension GroserClient {
    // MARK: Blocking calls

    /// The server's version, uptime, catalog version and methods.
    public func serverInfo(timeout: Double? = nil) throws(GroserError) -> ServerInfo {
        guard case .serverInfo(let v) = try call(.serverInfo, timeout: timeout) else { throw Self.mismatch("ServerInfo") }
        return v
    }

    /// Every city with its stores and default store, ordered by code.
    public func listCities(timeout: Double? = nil) throws(GroserError) -> CityList {
        guard case .listCities(let v) = try call(.listCities, timeout: timeout) else { throw Self.mismatch("ListCities") }
        return v
    }

    /// A store's departments and shelves (and products, when asked); a city
    /// selects its default store.
    public func store(_ selector: StoreSelector, includeProducts: Bool = false,
                      timeout: Double? = nil) throws(GroserError) -> StoreCatalog {
        let method = RequestMethod.getStore(selector: selector, includeProducts: includeProducts)
        guard case .getStore(let v) = try call(method, timeout: timeout) else { throw Self.mismatch("GetStore") }
        return v
    }

    /// One shelf with its products sorted by name.
    public func shelf(_ uid: String, timeout: Double? = nil) throws(GroserError) -> ShelfContents {
        guard case .getShelf(let v) = try call(.getShelf(shelfUID: uid), timeout: timeout) else { throw Self.mismatch("GetShelf") }
        return v
    }

    // MARK: Async calls (Swift concurrency)

    /// The server's version, uptime, catalog version and methods.
    public func serverInfo(timeout: Duration? = nil) async throws(GroserError) -> ServerInfo {
        try await answer(.serverInfo, timeout, "ServerInfo") { if case .serverInfo(let v) = $0 { v } else { nil } }
    }

    /// Every city with its stores and default store, ordered by code.
    public func listCities(timeout: Duration? = nil) async throws(GroserError) -> CityList {
        try await answer(.listCities, timeout, "ListCities") { if case .listCities(let v) = $0 { v } else { nil } }
    }

    /// A store's catalog; a city selects its default store.
    public func store(_ selector: StoreSelector, includeProducts: Bool = false,
                      timeout: Duration? = nil) async throws(GroserError) -> StoreCatalog {
        try await answer(.getStore(selector: selector, includeProducts: includeProducts), timeout, "GetStore") {
            if case .getStore(let v) = $0 { v } else { nil }
        }
    }

    /// One shelf with its products sorted by name.
    public func shelf(_ uid: String, timeout: Duration? = nil) async throws(GroserError) -> ShelfContents {
        try await answer(.getShelf(shelfUID: uid), timeout, "GetShelf") { if case .getShelf(let v) = $0 { v } else { nil } }
    }

    // MARK: ListStores: a city's stores without their catalogs

    /// The stores of a city, ordered by uid, each with whether it is the
    /// city's default and its store version.
    public func stores(of city: CitySelector, timeout: Double? = nil) throws(GroserError) -> StoreList {
        guard case .listStores(let v) = try call(.listStores(city: city), timeout: timeout) else { throw Self.mismatch("ListStores") }
        return v
    }

    /// The stores of a city, ordered by uid.
    public func stores(of city: CitySelector, timeout: Duration? = nil) async throws(GroserError) -> StoreList {
        try await answer(.listStores(city: city), timeout, "ListStores") { if case .listStores(let v) = $0 { v } else { nil } }
    }

    // MARK: GetProducts: products of one store by uid

    /// The products of `storeUID` with these uids, in the order asked (each
    /// once), and the uids the store does not sell. At most 200 uids.
    public func products(_ uids: [String], in storeUID: String, timeout: Double? = nil) throws(GroserError) -> GetProductsResponse {
        let request = GetProductsRequest(storeUID: storeUID, productUIDs: uids)
        guard case .getProducts(let v) = try call(.getProducts(request), timeout: timeout) else { throw Self.mismatch("GetProducts") }
        return v
    }

    /// The products of `storeUID` with these uids, in the order asked.
    public func products(_ uids: [String], in storeUID: String, timeout: Duration? = nil) async throws(GroserError) -> GetProductsResponse {
        let request = GetProductsRequest(storeUID: storeUID, productUIDs: uids)
        return try await answer(.getProducts(request), timeout, "GetProducts") { if case .getProducts(let v) = $0 { v } else { nil } }
    }
}
