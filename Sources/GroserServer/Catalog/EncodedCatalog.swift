import GroserSearch
import GroserStorage
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif
import GroserWire

/// One shelf's products, encoded once: the `Shelf` message (uid, name,
/// product_count, products) that GetShelf and GetStore send as it is, and
/// where each product's own encoding lies in it, for ListProducts' pages.
/// A price or stock change re-encodes the one shelf it touches.
public final class ShelfSegment: Sendable {
    public let uid: String
    public let name: String
    public let productCount: Int
    /// The encoded `Shelf` message, products included.
    let message: [UInt8]
    /// Each product's `Product` message inside `message`: its start and length.
    let productRanges: [ProductRange]
    /// Each product's stock, for search's ranking and in-stock filter.
    let outOfStock: [Bool]

    struct ProductRange: Sendable {
        var start: UInt32
        var count: UInt32
    }

    /// Encodes `shelf` (its products already sorted and with absolute image URLs).
    init(_ shelf: Shelf) {
        uid = shelf.uid
        name = shelf.name
        productCount = shelf.products.count
        // The message is the shelf's own fields, then each product as field 4,
        // written here from the products' encodings so their offsets are known.
        var head = shelf
        head.products = []
        head.productCount = UInt32(clamping: shelf.products.count)
        var out = BodyEncoder.shelf(head)
        var ranges: [ProductRange] = []
        ranges.reserveCapacity(shelf.products.count)
        for p in shelf.products {
            let bytes = BodyEncoder.product(p)
            ProtoWriter.appendTag(field: 4, wireType: ProtoWriter.wireLengthDelimited, to: &out)
            ProtoWriter.appendVarint(UInt64(bytes.count), to: &out)
            ranges.append(ProductRange(start: UInt32(out.count), count: UInt32(bytes.count)))
            out.append(contentsOf: bytes)
        }
        message = out
        productRanges = ranges
        outOfStock = shelf.products.map(\.outOfStock)
    }

    /// The products of `served` (this segment's products, in its order)
    /// whose encoding differs from the one at the same place in `old`: the
    /// ones a change touched, compared byte for byte, one shelf's worth.
    func changedProducts(since old: ShelfSegment, served: [Product]) -> [ProductChange] {
        var changed: [ProductChange] = []
        for (i, p) in served.enumerated() where i < productRanges.count {
            let same = i < old.productRanges.count && productRanges[i].count == old.productRanges[i].count
                && message.withUnsafeBytes { new in
                    old.message.withUnsafeBytes { was in
                        let a = productRanges[i], b = old.productRanges[i]
                        return memcmp(new.baseAddress! + Int(a.start), was.baseAddress! + Int(b.start), Int(a.count)) == 0
                    }
                }
            if !same {
                changed.append(ProductChange(uid: p.uid, shelfUID: uid, price: p.price, outOfStock: p.outOfStock))
            }
        }
        return changed
    }
}

/// One store's part of the catalog: its GetStore body without products,
/// and its departments' shelves as segments, with the version of the store.
public final class StoreSegments: Sendable {
    public let uid: String
    public let cityUID: String
    /// Grows whenever anything this store shows changes: the catalog version
    /// of its last change (or of the load), so it survives a restart.
    public let version: UInt64
    /// Changes only when the store's list of products changes (products
    /// added, removed or renamed), not with prices or stock: page tokens
    /// stay good across price changes.
    public let layoutVersion: UInt64
    /// GetStore's body without products, less the versions (appended per answer).
    let summaryBody: [UInt8]
    /// `Store.summary` (field 1), encoded with its tag.
    let summaryField: [UInt8]
    /// `GetStoreResponse.city` (field 2), encoded with its tag.
    let cityField: [UInt8]
    let departments: [DepartmentSegments]
    /// The index in the flattened shelf list where each shelf's products start.
    let shelfStarts: [Int]
    public let productCount: Int
    /// The shelves in the store's order, and each one's department (an index into `departments`).
    let flatShelves: [ShelfSegment]
    let departmentOfShelf: [Int]
    /// Every product's stock flag in the store's order, for search (one byte
    /// a product, copied from the shelves at each version).
    let outOfStock: [Bool]
    /// The store's products indexed for SearchProducts, in the same order.
    public let search: SearchIndex
    /// What `search` holds, counted once when it is built (Stats).
    public let searchBytes: Int

    struct DepartmentSegments: Sendable {
        var uid: String
        var name: String
        /// The department's uid and name fields.
        var head: [UInt8]
        var shelves: [ShelfSegment]
    }

    init(uid: String, cityUID: String, version: UInt64, layoutVersion: UInt64, summaryBody: [UInt8],
         summaryField: [UInt8], cityField: [UInt8], departments: [DepartmentSegments], search: SearchIndex, searchBytes: Int? = nil) {
        self.uid = uid
        self.cityUID = cityUID
        self.version = version
        self.layoutVersion = layoutVersion
        self.summaryBody = summaryBody
        self.summaryField = summaryField
        self.cityField = cityField
        self.departments = departments
        var starts: [Int] = []
        var total = 0
        for d in departments {
            for s in d.shelves {
                starts.append(total)
                total += s.productCount
            }
        }
        shelfStarts = starts
        productCount = total
        flatShelves = departments.flatMap { d in d.shelves }
        departmentOfShelf = departments.indices.flatMap { d in Array(repeating: d, count: departments[d].shelves.count) }
        var out: [Bool] = []
        out.reserveCapacity(total)
        for s in flatShelves { out.append(contentsOf: s.outOfStock) }
        outOfStock = out
        self.search = search
        self.searchBytes = searchBytes ?? search.memoryBytes
    }

    /// A store's encoded parts, before its search index joins them.
    struct Parts: Sendable {
        var uid: String
        var cityUID: String
        var summaryBody: [UInt8]
        var summaryField: [UInt8]
        var cityField: [UInt8]
        var departments: [DepartmentSegments]
    }

    /// The store's search input: its shelves in the store's order.
    static func searchShelves(_ store: Store) -> [SearchShelf] {
        store.departments.flatMap { d in
            d.shelves.map { SearchShelf(uid: $0.uid, name: $0.name, departmentName: d.name, products: $0.products) }
        }
    }

    convenience init(_ parts: Parts, version: UInt64, layoutVersion: UInt64, search: SearchIndex) {
        self.init(uid: parts.uid, cityUID: parts.cityUID, version: version, layoutVersion: layoutVersion,
                  summaryBody: parts.summaryBody, summaryField: parts.summaryField, cityField: parts.cityField,
                  departments: parts.departments, search: search)
    }

    /// Encodes `store` (products sorted, image URLs absolute) in `city`.
    static func parts(_ store: Store, city: City) -> Parts {
        var bare = store
        for d in bare.departments.indices {
            for h in bare.departments[d].shelves.indices { bare.departments[d].shelves[h].products = [] }
        }
        var summaryField: [UInt8] = []
        Self.appendField(1, BodyEncoder.storeSummary(store.summary), to: &summaryField)
        var cityField: [UInt8] = []
        Self.appendField(2, BodyEncoder.city(city), to: &cityField)
        let departments = store.departments.map { d in
            DepartmentSegments(uid: d.uid, name: d.name,
                               head: BodyEncoder.department(Department(uid: d.uid, name: d.name, shelves: [])),
                               shelves: d.shelves.map(ShelfSegment.init))
        }
        return Parts(uid: store.uid, cityUID: store.summary.cityUID,
                     summaryBody: BodyEncoder.getStore(StoreCatalog(store: bare, city: city, catalogVersion: 0)),
                     summaryField: summaryField, cityField: cityField, departments: departments)
    }

    /// The same store with some shelves replaced, at `version`; the search
    /// index re-reads only those whose products' words changed (a price or
    /// stock change leaves it as it is).
    func replacing(shelves changed: [(location: ShelfLocation, segment: ShelfSegment, products: [Product])], version: UInt64,
                   stemmer: Stemmer) -> StoreSegments {
        var departments = self.departments
        for c in changed { departments[c.location.department].shelves[c.location.shelf] = c.segment }
        let search = self.search.replacing(changed.map { c in
            (shelf: flatIndex(of: c.location), products: c.products, name: c.segment.name,
             departmentName: departments[c.location.department].name)
        }, stemmer: stemmer)
        return StoreSegments(uid: uid, cityUID: cityUID, version: version, layoutVersion: layoutVersion,
                             summaryBody: summaryBody, summaryField: summaryField, cityField: cityField,
                             departments: departments, search: search, searchBytes: search === self.search ? searchBytes : nil)
    }

    func shelf(at location: ShelfLocation) -> ShelfSegment {
        departments[location.department].shelves[location.shelf]
    }

    /// The shelf's position in the flattened list of the store's shelves.
    func flatIndex(of location: ShelfLocation) -> Int {
        var i = 0
        for d in 0..<location.department { i += departments[d].shelves.count }
        return i + location.shelf
    }

    /// Calls `body` with each product from position `start` (in the store's
    /// order) up to `end`, until it returns false.
    func forEachProduct(from start: Int, upTo end: Int, _ body: (ShelfSegment, ShelfSegment.ProductRange) -> Bool) {
        guard start < end else { return }
        // The last shelf starting at or before `start`.
        var lo = 0, hi = shelfStarts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if shelfStarts[mid] <= start { lo = mid } else { hi = mid - 1 }
        }
        var position = start
        var flat = 0
        for d in departments {
            for s in d.shelves {
                defer { flat += 1 }
                guard flat >= lo else { continue }
                var i = position - shelfStarts[flat]
                while i < s.productCount {
                    guard position < end, body(s, s.productRanges[i]) else { return }
                    i += 1
                    position += 1
                }
            }
        }
    }

    static func appendField(_ number: UInt32, _ bytes: [UInt8], to out: inout [UInt8]) {
        ProtoWriter.appendTag(field: number, wireType: ProtoWriter.wireLengthDelimited, to: &out)
        ProtoWriter.appendVarint(UInt64(bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    /// The size of the `Store` message with every shelf's products.
    var storeMessageSize: Int {
        var size = summaryField.count
        for d in departments {
            let n = departmentSize(d)
            size += 1 + ProtoWriter.varintSize(UInt64(n)) + n
        }
        return size
    }

    private func departmentSize(_ d: DepartmentSegments) -> Int {
        d.shelves.reduce(d.head.count) { $0 + 1 + ProtoWriter.varintSize(UInt64($1.message.count)) + $1.message.count }
    }

    /// Appends the `Store` message with every shelf's products, from the
    /// segments: only lengths are computed, nothing is re-encoded.
    func appendStoreMessage(to out: inout [UInt8]) {
        out.append(contentsOf: summaryField)
        for d in departments {
            ProtoWriter.appendTag(field: 2, wireType: ProtoWriter.wireLengthDelimited, to: &out)
            ProtoWriter.appendVarint(UInt64(departmentSize(d)), to: &out)
            out.append(contentsOf: d.head)
            for s in d.shelves {
                ProtoWriter.appendTag(field: 3, wireType: ProtoWriter.wireLengthDelimited, to: &out)
                ProtoWriter.appendVarint(UInt64(s.message.count), to: &out)
                out.append(contentsOf: s.message)
            }
        }
    }
}

/// Where a shelf is: its store and its place in the store.
public struct ShelfLocation: Sendable, Hashable {
    public var storeUID: String
    var department: Int
    var shelf: Int
    public var departmentUID: String
}

/// Which shelf is where: shared by catalog versions until a store's layout
/// changes, so a price change copies nothing of it.
final class ShelfIndex: Sendable {
    let locations: [String: ShelfLocation]
    init(_ locations: [String: ShelfLocation]) { self.locations = locations }
}

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

/// Protocol constants.
public enum ProtocolInfo {
    public static let version: UInt32 = 1
    public static let serverVersion = "groserd " + GroserRelease.version
}

/// Product image URLs: stored relative, served absolute.
public enum ImageURL {
    /// `url` under `base` (scheme://host[:port][/path]), prefixed once: a
    /// URL that starts with a scheme and "://" passes through unchanged; a
    /// network-path one ("//host/…") gets the base's scheme; any other is
    /// joined to the base by one "/". PROTOCOL.md §10.
    public static func absolute(_ url: String, base: String) -> String {
        if url.isEmpty || base.isEmpty || startsWithScheme(url) { return url }
        if url.hasPrefix("//") {
            guard let colon = base.firstIndex(of: ":") else { return url }
            return String(base[..<colon]) + ":" + url
        }
        var prefix = Substring(base)
        while prefix.hasSuffix("/") { prefix = prefix.dropLast() }
        var path = Substring(url)
        while path.hasPrefix("/") { path = path.dropFirst() }
        return "\(prefix)/\(path)"
    }

    /// RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://".
    static func startsWithScheme(_ url: String) -> Bool {
        let bytes = Array(url.utf8.prefix(64))
        guard let first = bytes.first, (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7a else { return false }
        for (i, b) in bytes.enumerated().dropFirst() {
            if b == UInt8(ascii: ":") { return bytes[i...].starts(with: Array("://".utf8)) }
            let ok = ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a) || (b >= 0x30 && b <= 0x39)
                || b == UInt8(ascii: "+") || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
            if !ok { return false }
        }
        return false
    }
}
