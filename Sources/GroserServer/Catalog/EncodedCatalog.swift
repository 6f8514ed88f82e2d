import GroserSearch
import GroserStorage
import GroserSystem
import GroserWire

/// One catalog version, indexed, with every response body encoded once and
/// kept in segments: per store, and per shelf. Immutable: event loops share
/// it; a catalog change builds the next one from this one, replacing only the
/// stores and shelves it touches (`replacing`).
public final class EncodedCatalog: Sendable {
    public let version: UInt64

    /// ListCities' body, less the catalog version (appended per answer).
    let listCitiesBody: [UInt8]
    /// Per store uid.
    public let stores: [String: StoreSegments]
    let shelfIndex: ShelfIndex
    /// ServerInfo's body less the catalog version and the uptime, which are appended per request.
    let serverInfoStaticBody: [UInt8]
    /// Default store uid per upper-cased city code and per city uid.
    let defaultStoreByCityCode: [String: String]
    let defaultStoreByCityUID: [String: String]
    let imageBaseURL: String

    private init(version: UInt64, listCitiesBody: [UInt8], stores: [String: StoreSegments], shelfIndex: ShelfIndex,
                 serverInfoStaticBody: [UInt8], defaultStoreByCityCode: [String: String],
                 defaultStoreByCityUID: [String: String], imageBaseURL: String) {
        self.version = version
        self.listCitiesBody = listCitiesBody
        self.stores = stores
        self.shelfIndex = shelfIndex
        self.serverInfoStaticBody = serverInfoStaticBody
        self.defaultStoreByCityCode = defaultStoreByCityCode
        self.defaultStoreByCityUID = defaultStoreByCityUID
        self.imageBaseURL = imageBaseURL
    }

    /// Indexes `catalog` and encodes its responses; image URLs become
    /// absolute under `imageBaseURL`. Every store is at `version`.
    public convenience init(catalog: Catalog, version: UInt64, imageBaseURL: String, serverVersion: String) {
        var builder = Builder(cities: catalog.cities, version: version, imageBaseURL: imageBaseURL)
        for store in catalog.stores { builder.add(store) }
        let built = builder.finish(serverVersion: serverVersion)
        self.init(version: built.version, listCitiesBody: built.listCitiesBody, stores: built.stores, shelfIndex: built.shelfIndex,
                  serverInfoStaticBody: built.serverInfoStaticBody, defaultStoreByCityCode: built.defaultStoreByCityCode,
                  defaultStoreByCityUID: built.defaultStoreByCityUID, imageBaseURL: imageBaseURL)
    }

    /// Loads the catalog from `store` a store at a time, encoding each as it
    /// comes, so the decoded catalog is never held whole (a million products
    /// decoded take about a gigabyte; encoded, a tenth of that).
    /// `previous`: the catalog served until now, whose stores' search
    /// indexes keep every shelf whose words did not change.
    public static func load(from store: any CatalogStore, imageBaseURL: String, serverVersion: String,
                            previous: EncodedCatalog? = nil) throws(StorageError) -> EncodedCatalog {
        var builder: Builder?
        try store.loadCatalog { (part: CatalogPart) throws(StorageError) in
            switch part {
            case .cities(let cities, let version):
                builder = Builder(cities: cities, version: version, imageBaseURL: imageBaseURL, previous: previous)
            case .store(let s):
                builder?.add(s)
            }
        }
        guard let builder else { throw StorageError("the store gave no cities before its stores") }
        return builder.finish(serverVersion: serverVersion)
    }

    /// Encodes stores one by one into the segments of one catalog version.
    struct Builder {
        let cities: [City]
        let cityByUID: [String: City]
        let version: UInt64
        let imageBaseURL: String
        var parts: [StoreSegments.Parts] = []
        var locations: [String: ShelfLocation] = [:]
        /// Builds the stores' search indexes beside the encoding.
        let indexer = SearchIndexer()
        let previous: EncodedCatalog?

        init(cities: [City], version: UInt64, imageBaseURL: String, previous: EncodedCatalog? = nil) {
            self.previous = previous
            self.cities = cities
            cityByUID = Dictionary(cities.map { ($0.uid, $0) }, uniquingKeysWith: { a, _ in a })
            self.version = version
            self.imageBaseURL = imageBaseURL
        }

        mutating func add(_ source: Store) {
            var store = source
            for d in store.departments.indices {
                for h in store.departments[d].shelves.indices {
                    store.departments[d].shelves[h].products =
                        EncodedCatalog.served(store.departments[d].shelves[h].products, imageBaseURL: imageBaseURL)
                }
            }
            let city = cityByUID[store.summary.cityUID]
                ?? City(uid: store.summary.cityUID, code: "", name: "", stores: [], defaultStoreUID: "")
            indexer.submit(store.uid, StoreSegments.searchShelves(store), reusing: previous?.stores[store.uid]?.search)
            parts.append(StoreSegments.parts(store, city: city))
            for (di, d) in store.departments.enumerated() {
                for (hi, h) in d.shelves.enumerated() {
                    locations[h.uid] = ShelfLocation(storeUID: store.uid, department: di, shelf: hi, departmentUID: d.uid)
                }
            }
        }

        func finish(serverVersion: String) -> EncodedCatalog {
            let indexes = indexer.finish()
            var stores: [String: StoreSegments] = [:]
            for p in parts {
                stores[p.uid] = StoreSegments(p, version: version, layoutVersion: version, search: indexes[p.uid]!)
            }
            return EncodedCatalog(
                version: version,
                listCitiesBody: BodyEncoder.listCities(CityList(cities: cities, catalogVersion: 0)),
                stores: stores, shelfIndex: ShelfIndex(locations),
                serverInfoStaticBody: BodyEncoder.serverInfo(ServerInfo(
                    serverVersion: serverVersion, protocolVersion: ProtocolInfo.version, uptimeMilliseconds: 0,
                    catalogVersion: 0, methods: MethodField.allCases.map(\.methodName))),
                defaultStoreByCityCode: Dictionary(cities.map { ($0.code.uppercased(), $0.defaultStoreUID) },
                                                   uniquingKeysWith: { a, _ in a }),
                defaultStoreByCityUID: Dictionary(cities.map { ($0.uid, $0.defaultStoreUID) },
                                                  uniquingKeysWith: { a, _ in a }),
                imageBaseURL: imageBaseURL)
        }
    }

    /// Products as answers show them: sorted by name (GetShelf promises
    /// name order whatever the backend returns), image URLs absolute.
    static func served(_ products: [Product], imageBaseURL: String) -> [Product] {
        var out = products.sorted { $0.name < $1.name }
        for i in out.indices { out[i].imageURL = ImageURL.absolute(out[i].imageURL, base: imageBaseURL) }
        return out
    }

    /// Where the shelf `uid` is, or nil.
    public func location(ofShelf uid: String) -> ShelfLocation? { shelfIndex.locations[uid] }

    /// The shelf's segment, or nil.
    public func shelf(_ uid: String) -> ShelfSegment? {
        guard let l = shelfIndex.locations[uid], let store = stores[l.storeUID] else { return nil }
        return store.shelf(at: l)
    }

    /// The next catalog version: these shelves' products replaced (as
    /// storage has them now), their stores at `version`; every other store
    /// and shelf shared with this one. Nil when a shelf is not in this
    /// catalog's layout (the caller then loads the catalog whole).
    func replacing(shelves changed: [String: [Product]], version: UInt64) -> (EncodedCatalog, CatalogChange)? {
        var stores = self.stores
        var touched: [String: [String]] = [:]
        var products: [String: [ProductChange]] = [:]
        var segments: [String: [(location: ShelfLocation, segment: ShelfSegment, products: [Product])]] = [:]
        for (uid, shelfProducts) in changed {
            guard let l = shelfIndex.locations[uid], let store = stores[l.storeUID] else { return nil }
            let old = store.shelf(at: l)
            let served = Self.served(shelfProducts, imageBaseURL: imageBaseURL)
            let segment = ShelfSegment(Shelf(uid: uid, name: old.name, productCount: UInt32(clamping: served.count),
                                             products: served))
            // A changed number of products changes the store's layout: that is an import's path.
            guard segment.productCount == old.productCount else { return nil }
            segments[l.storeUID, default: []].append((l, segment, served))
            touched[l.storeUID, default: []].append(uid)
            products[l.storeUID, default: []].append(contentsOf: segment.changedProducts(since: old, served: served))
        }
        for (storeUID, shelves) in segments {
            stores[storeUID] = SearchStemmers.pool.with { stores[storeUID]!.replacing(shelves: shelves, version: version, stemmer: $0) }
        }
        let next = EncodedCatalog(version: version, listCitiesBody: listCitiesBody, stores: stores, shelfIndex: shelfIndex,
                                  serverInfoStaticBody: serverInfoStaticBody, defaultStoreByCityCode: defaultStoreByCityCode,
                                  defaultStoreByCityUID: defaultStoreByCityUID, imageBaseURL: imageBaseURL)
        let change = CatalogChange(
            catalogVersion: version,
            stores: touched.keys.sorted().map {
                StoreChange(storeUID: $0, storeVersion: version, shelfUIDs: touched[$0]!.sorted(),
                            products: products[$0, default: []].sorted { $0.uid < $1.uid })
            })
        return (next, change)
    }
}

/// What one catalog change touched, published inside the daemon after the
/// new segments are in place: the seam for watchers, the search index and
/// other hosts.
public struct CatalogChange: Sendable, Hashable {
    public var catalogVersion: UInt64
    public var stores: [StoreChange]
    /// True when the catalog was loaded whole (at start, or a change that
    /// altered a store's layout): every store may have changed.
    public var reloaded = false

    public init(catalogVersion: UInt64, stores: [StoreChange], reloaded: Bool = false) {
        self.catalogVersion = catalogVersion
        self.stores = stores
        self.reloaded = reloaded
    }
}

/// One store's part of a `CatalogChange`.
public struct StoreChange: Sendable, Hashable {
    public var storeUID: String
    public var storeVersion: UInt64
    /// The shelves whose segments were re-encoded.
    public var shelfUIDs: [String]
    /// The products of those shelves whose encoding changed, as they are now.
    public var products: [ProductChange]

    public init(storeUID: String, storeVersion: UInt64, shelfUIDs: [String], products: [ProductChange] = []) {
        self.storeUID = storeUID
        self.storeVersion = storeVersion
        self.shelfUIDs = shelfUIDs
        self.products = products
    }
}
