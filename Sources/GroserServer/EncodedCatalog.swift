import GroserStorage
import GroserWire

/// One catalog version, indexed and with every response body encoded once.
/// Immutable: event loops share it; a catalog change builds a new one.
public final class EncodedCatalog: Sendable {
    public let version: UInt64

    /// ListCities' body.
    let listCitiesBody: [UInt8]
    /// GetStore's body per store uid, without and with products.
    let storeBodies: [String: (summary: [UInt8], withProducts: [UInt8])]
    /// GetShelf's body per shelf uid.
    let shelfBodies: [String: [UInt8]]
    /// ServerInfo's body less the uptime, which is appended per request.
    let serverInfoStaticBody: [UInt8]
    /// Default store uid per upper-cased city code and per city uid.
    let defaultStoreByCityCode: [String: String]
    let defaultStoreByCityUID: [String: String]

    /// Indexes `catalog` and encodes its responses; image URLs become
    /// absolute under `imageBaseURL`.
    public init(catalog source: Catalog, version: UInt64, imageBaseURL: String, serverVersion: String) {
        var catalog = source
        for s in catalog.stores.indices {
            for d in catalog.stores[s].departments.indices {
                for h in catalog.stores[s].departments[d].shelves.indices {
                    // GetShelf promises name order whatever the backend returns.
                    catalog.stores[s].departments[d].shelves[h].products.sort { $0.name < $1.name }
                    for p in catalog.stores[s].departments[d].shelves[h].products.indices {
                        let url = catalog.stores[s].departments[d].shelves[h].products[p].imageURL
                        catalog.stores[s].departments[d].shelves[h].products[p].imageURL =
                            ImageURL.absolute(url, base: imageBaseURL)
                    }
                }
            }
        }
        // The decoded catalog is not kept: every answer is served from the
        // encoded bodies, and holding both roughly doubled groserd's memory.
        self.version = version

        listCitiesBody = BodyEncoder.listCities(CityList(cities: catalog.cities, catalogVersion: version))
        let cityByUID = Dictionary(catalog.cities.map { ($0.uid, $0) }, uniquingKeysWith: { a, _ in a })
        var stores: [String: (summary: [UInt8], withProducts: [UInt8])] = [:]
        var shelves: [String: [UInt8]] = [:]
        for store in catalog.stores {
            let city = cityByUID[store.summary.cityUID]
                ?? City(uid: store.summary.cityUID, code: "", name: "", stores: [], defaultStoreUID: "")
            var bare = store
            for d in bare.departments.indices {
                for h in bare.departments[d].shelves.indices { bare.departments[d].shelves[h].products = [] }
            }
            stores[store.uid] = (
                BodyEncoder.getStore(StoreCatalog(store: bare, city: city, catalogVersion: version)),
                BodyEncoder.getStore(StoreCatalog(store: store, city: city, catalogVersion: version))
            )
            for d in store.departments {
                for h in d.shelves {
                    shelves[h.uid] = BodyEncoder.getShelf(ShelfContents(
                        shelf: h, storeUID: store.uid, departmentUID: d.uid, catalogVersion: version))
                }
            }
        }
        storeBodies = stores
        shelfBodies = shelves
        serverInfoStaticBody = BodyEncoder.serverInfo(ServerInfo(
            serverVersion: serverVersion, protocolVersion: ProtocolInfo.version, uptimeMilliseconds: 0,
            catalogVersion: version, methods: MethodField.allCases.map(\.methodName)))
        defaultStoreByCityCode = Dictionary(catalog.cities.map { ($0.code.uppercased(), $0.defaultStoreUID) },
                                            uniquingKeysWith: { a, _ in a })
        defaultStoreByCityUID = Dictionary(catalog.cities.map { ($0.uid, $0.defaultStoreUID) },
                                           uniquingKeysWith: { a, _ in a })
    }
}

/// Protocol constants.
public enum ProtocolInfo {
    public static let version: UInt32 = 1
    public static let serverVersion = "groserd 0.1.0"
}

/// Product image URLs: stored relative, served absolute.
public enum ImageURL {
    /// `relative` under `base` (scheme://host:port), prefixed once; an
    /// already absolute URL (it has a scheme) passes through unchanged.
    public static func absolute(_ url: String, base: String) -> String {
        if url.isEmpty || url.contains("://") || base.isEmpty { return url }
        var prefix = Substring(base)
        while prefix.hasSuffix("/") { prefix = prefix.dropLast() }
        return url.hasPrefix("/") ? "\(prefix)\(url)" : "\(prefix)/\(url)"
    }
}
