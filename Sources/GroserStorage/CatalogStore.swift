import GroserWire

/// Where the catalog lives. The daemon talks to storage only through this
/// protocol, so a second backend (PostgreSQL, shared by several hosts) is a
/// new conforming type, not a change to the server.
public protocol CatalogStore: Sendable {

    /// The catalog a store at a time, in one snapshot: `visit` gets the
    /// cities and the version first, then every store with its full catalog,
    /// in display order, so a caller that encodes and drops each never holds
    /// the decoded catalog whole.
    func loadCatalog(_ visit: (CatalogPart) throws(StorageError) -> Void) throws(StorageError)

    /// The current catalog version, cheap to ask.
    func catalogVersion() throws(StorageError) -> UInt64

    /// The catalog version now, and every shelf holding a product that
    /// changed after `version`, with all of that shelf's products (image URLs
    /// as stored), read in one snapshot.
    func loadChangedShelves(since version: UInt64) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]])
}

/// One part of a catalog loaded a store at a time.
public enum CatalogPart: Sendable {
    /// First: every city (ordered by code) and the catalog version.
    case cities([City], version: UInt64)
    /// Then each store with its departments, shelves and products.
    case store(Store)
}

extension CatalogStore {
    /// The whole catalog and the version it is at, decoded (for tests and
    /// tools; the daemon encodes a store at a time instead).
    public func loadCatalog() throws(StorageError) -> (catalog: Catalog, version: UInt64) {
        var cities: [City] = []
        var stores: [Store] = []
        var version: UInt64 = 0
        try loadCatalog { (part: CatalogPart) throws(StorageError) in
            switch part {
            case .cities(let c, let v): cities = c; version = v
            case .store(let s): stores.append(s)
            }
        }
        return (Catalog(cities: cities, stores: stores), version)
    }
}
