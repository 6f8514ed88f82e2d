import GroserWire

/// The whole catalog as one immutable value: every city, and every store
/// with its departments, shelves and products (products filled in).
public struct Catalog: Sendable, Hashable {
    /// Cities ordered by code.
    public var cities: [City]
    /// Every store with its full catalog.
    public var stores: [Store]

    public init(cities: [City], stores: [Store]) {
        self.cities = cities
        self.stores = stores
    }
}
