import GroserSearch
import GroserStorage
import GroserWire

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
    /// The products by uid (GetProducts).
    let products: ProductIndex

    struct DepartmentSegments: Sendable {
        var uid: String
        var name: String
        /// The department's uid and name fields.
        var head: [UInt8]
        var shelves: [ShelfSegment]
    }

    init(uid: String, cityUID: String, version: UInt64, layoutVersion: UInt64, summaryBody: [UInt8],
         summaryField: [UInt8], cityField: [UInt8], departments: [DepartmentSegments], search: SearchIndex, searchBytes: Int? = nil,
         products: ProductIndex? = nil) {
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
        self.products = products ?? ProductIndex(flatShelves)
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
        Self.appendField(FieldNumbers.Store.summary, BodyEncoder.storeSummary(store.summary), to: &summaryField)
        var cityField: [UInt8] = []
        Self.appendField(FieldNumbers.GetStoreResponse.city, BodyEncoder.city(city), to: &cityField)
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
    /// stock change leaves it as it is), and the uid index is kept when every
    /// replaced shelf has the same uids in the same places.
    func replacing(shelves changed: [(location: ShelfLocation, segment: ShelfSegment, products: [Product])], version: UInt64,
                   stemmer: Stemmer) -> StoreSegments {
        var departments = self.departments
        for c in changed { departments[c.location.department].shelves[c.location.shelf] = c.segment }
        let search = self.search.replacing(changed.map { c in
            (shelf: flatIndex(of: c.location), products: c.products, name: c.segment.name,
             departmentName: departments[c.location.department].name)
        }, stemmer: stemmer)
        let sameUIDs = changed.allSatisfy { c in
            let old = shelf(at: c.location)
            return old.productCount == c.segment.productCount && zip(old.productRanges, c.segment.productRanges).allSatisfy {
                ProductIndex.sameUID((old, $0.0), (c.segment, $0.1))
            }
        }
        return StoreSegments(uid: uid, cityUID: cityUID, version: version, layoutVersion: layoutVersion,
                             summaryBody: summaryBody, summaryField: summaryField, cityField: cityField,
                             departments: departments, search: search, searchBytes: search === self.search ? searchBytes : nil,
                             products: sameUIDs ? products : nil)
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

    /// The shelf, the department and the position on the shelf of the
    /// store's `product`th product (in the store's order).
    func place(ofProduct product: Int) -> (shelf: ShelfSegment, department: DepartmentSegments, index: Int)? {
        guard product >= 0 && product < productCount else { return nil }
        var lo = 0, hi = shelfStarts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if shelfStarts[mid] <= product { lo = mid } else { hi = mid - 1 }
        }
        // An empty shelf shares its start with the next: the last one wins.
        return (flatShelves[lo], departments[departmentOfShelf[lo]], product - shelfStarts[lo])
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
            ProtoWriter.appendTag(field: FieldNumbers.Store.departments, wireType: ProtoWriter.wireLengthDelimited, to: &out)
            ProtoWriter.appendVarint(UInt64(departmentSize(d)), to: &out)
            out.append(contentsOf: d.head)
            for s in d.shelves {
                ProtoWriter.appendTag(field: FieldNumbers.Department.shelves, wireType: ProtoWriter.wireLengthDelimited, to: &out)
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
