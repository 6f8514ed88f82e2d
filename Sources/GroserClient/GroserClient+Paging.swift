import GroserSystem

/// Paging through a store's products (ListProducts), and a store with all
/// its products however large it is.
extension GroserClient {
    /// One page of a store's (or one shelf's) products.
    public func productPage(_ request: ProductPageRequest, timeout: Double? = nil) throws(GroserError) -> ProductPage {
        guard case .listProducts(let v) = try call(.listProducts(request), timeout: timeout) else { throw Self.mismatch("ListProducts") }
        return v
    }

    /// One page of a store's (or one shelf's) products.
    public func productPage(_ request: ProductPageRequest, timeout: Duration? = nil) async throws(GroserError) -> ProductPage {
        try await answer(.listProducts(request), timeout, "ListProducts") { if case .listProducts(let v) = $0 { v } else { nil } }
    }

    /// Every product of the store (or of one of its shelves), in the store's
    /// order, fetched a page at a time as the iteration goes. Blocking:
    /// `while let p = try products.next() { … }`.
    public func products(store storeUID: String, shelf shelfUID: String = "", pageSize: UInt32 = 1000,
                         timeout: Double? = nil) -> ProductIterator {
        ProductIterator(client: self, request: ProductPageRequest(storeUID: storeUID, shelfUID: shelfUID, pageSize: pageSize),
                        timeout: timeout)
    }

    /// The same as an `AsyncSequence`: `for try await p in client.productSequence(store:)`.
    public func productSequence(store storeUID: String, shelf shelfUID: String = "", pageSize: UInt32 = 1000,
                                timeout: Duration? = nil) -> ProductSequence {
        ProductSequence(client: self, request: ProductPageRequest(storeUID: storeUID, shelfUID: shelfUID, pageSize: pageSize),
                        timeout: timeout)
    }

    /// The store with every shelf's products: one GetStore when the answer
    /// fits in a frame; else (RESOURCE_EXHAUSTED) the store without products
    /// and its products by ListProducts, put on their shelves.
    public func storeWithProducts(_ selector: StoreSelector, timeout: Double? = nil) throws(GroserError) -> StoreCatalog {
        do {
            return try store(selector, includeProducts: true, timeout: timeout)
        } catch .server(let status) where status.code == .resourceExhausted {
            var catalog = try store(selector, includeProducts: false, timeout: timeout)
            var byShelf: [String: [Product]] = [:]
            var pages = products(store: catalog.store.uid, timeout: timeout)
            while let p = try pages.next() { byShelf[p.shelfUID, default: []].append(p) }
            for d in catalog.store.departments.indices {
                for h in catalog.store.departments[d].shelves.indices {
                    catalog.store.departments[d].shelves[h].products = byShelf[catalog.store.departments[d].shelves[h].uid] ?? []
                }
            }
            if let last = pages.storeVersion { catalog.storeVersion = max(catalog.storeVersion, last) }
            return catalog
        }
    }

    /// `storeWithProducts`, for async callers.
    public func storeWithProducts(_ selector: StoreSelector, timeout: Duration? = nil) async throws(GroserError) -> StoreCatalog {
        do {
            return try await store(selector, includeProducts: true, timeout: timeout)
        } catch .server(let status) where status.code == .resourceExhausted {
            var catalog = try await store(selector, includeProducts: false, timeout: timeout)
            var byShelf: [String: [Product]] = [:]
            var request = ProductPageRequest(storeUID: catalog.store.uid, shelfUID: "", pageSize: 1000)
            var lastVersion: UInt64?
            repeat {
                let page = try await productPage(request, timeout: timeout)
                for p in page.products { byShelf[p.shelfUID, default: []].append(p) }
                lastVersion = page.storeVersion
                request.pageToken = page.nextPageToken
            } while !request.pageToken.isEmpty
            for d in catalog.store.departments.indices {
                for h in catalog.store.departments[d].shelves.indices {
                    catalog.store.departments[d].shelves[h].products = byShelf[catalog.store.departments[d].shelves[h].uid] ?? []
                }
            }
            if let lastVersion { catalog.storeVersion = max(catalog.storeVersion, lastVersion) }
            return catalog
        }
    }
}

/// Products page by page, blocking (see `GroserClient.products(store:)`).
public struct ProductIterator: Sendable {
    let client: GroserClient
    var request: ProductPageRequest
    let timeout: Double?
    private var buffer: [Product] = []
    private var index = 0
    private var done = false
    /// The store's version on the last page fetched.
    public private(set) var storeVersion: UInt64?
    /// The number of products in the store (or shelf), once a page came.
    public private(set) var totalSize: UInt32?

    init(client: GroserClient, request: ProductPageRequest, timeout: Double?) {
        self.client = client
        self.request = request
        self.timeout = timeout
    }

    /// The next product, or nil after the last.
    public mutating func next() throws(GroserError) -> Product? {
        while index == buffer.count {
            if done { return nil }
            let page = try client.productPage(request, timeout: timeout)
            buffer = page.products
            index = 0
            storeVersion = page.storeVersion
            totalSize = page.totalSize
            request.pageToken = page.nextPageToken
            done = page.nextPageToken.isEmpty
        }
        defer { index += 1 }
        return buffer[index]
    }
}

/// Products page by page, for `for try await` (see `GroserClient.productSequence(store:)`).
public struct ProductSequence: AsyncSequence, Sendable {
    public typealias Element = Product
    let client: GroserClient
    let request: ProductPageRequest
    let timeout: Duration?

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, request: request, timeout: timeout)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: GroserClient
        var request: ProductPageRequest
        let timeout: Duration?
        var buffer: [Product] = []
        var index = 0
        var done = false

        public mutating func next() async throws(GroserError) -> Product? {
            while index == buffer.count {
                if done { return nil }
                if Task.isCancelled { throw .cancelled }
                let page = try await client.productPage(request, timeout: timeout)
                buffer = page.products
                index = 0
                request.pageToken = page.nextPageToken
                done = page.nextPageToken.isEmpty
            }
            defer { index += 1 }
            return buffer[index]
        }
    }
}

/// Catalog import and export (operators).
extension GroserClient {
    /// Sends one request of an import (see `ImportChunk`).
    public func importCatalog(_ chunk: ImportChunk, timeout: Double? = nil) throws(GroserError) -> ImportResult {
        guard case .importCatalog(let v) = try call(.importCatalog(chunk), timeout: timeout) else { throw Self.mismatch("ImportCatalog") }
        return v
    }

    /// One page of the catalog as records, in the canonical order.
    public func exportPage(_ request: ExportPageRequest, timeout: Double? = nil) throws(GroserError) -> ExportPage {
        guard case .exportCatalog(let v) = try call(.exportCatalog(request), timeout: timeout) else { throw Self.mismatch("ExportCatalog") }
        return v
    }
}
