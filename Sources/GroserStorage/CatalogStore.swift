import GroserWire

/// Where the catalog lives. The daemon talks to storage only through this
/// protocol, so a second backend (PostgreSQL, shared by several hosts) is a
/// new conforming type, not a change to the server.
public protocol CatalogStore: Sendable {
    /// The whole catalog and the version it is at. The version grows with
    /// every change; caches are keyed on it.
    func loadCatalog() throws(StorageError) -> (catalog: Catalog, version: UInt64)

    /// The current catalog version, cheap to ask.
    func catalogVersion() throws(StorageError) -> UInt64

    /// The catalog version now, and every shelf holding a product that
    /// changed after `version`, with all of that shelf's products (image URLs
    /// as stored), read in one snapshot.
    func loadChangedShelves(since version: UInt64) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]])
}
