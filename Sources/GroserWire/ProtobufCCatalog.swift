import CGroserProto
import CProtobufC

// protobuf-c conversion of the catalog methods' messages: ServerInfo,
// ListCities, GetStore, GetShelf and ListProducts, and the catalog model's
// messages the encoded catalog keeps (Product, Shelf, City, ...). groserd
// writes most catalog answers by hand from these encodings (EncodedCatalog).

extension Arena {
    /// Fills the request's method for GetStore, GetShelf and ListProducts; false for others.
    func catalogMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        switch method {
        case .getStore(let selector, let includeProducts, let known):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_GET_STORE
            p.pointee.get_store = message(Groser__V1__GetStoreRequest.self) { g in
                groser__v1__get_store_request__init(g)
                g.pointee.include_products = includeProducts ? 1 : 0
                g.pointee.known_store_version = known
                switch selector {
                case .cityCode(let s)?:
                    g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_CODE
                    g.pointee.city_code = string(s)
                case .cityUID(let s)?:
                    g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_UID
                    g.pointee.city_uid = string(s)
                case .storeUID(let s)?:
                    g.pointee.selector_case = GROSER__V1__GET_STORE_REQUEST__SELECTOR_STORE_UID
                    g.pointee.store_uid = string(s)
                case nil:
                    break
                }
            }
        case .getShelf(let uid, let known):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_GET_SHELF
            p.pointee.get_shelf = message(Groser__V1__GetShelfRequest.self) { g in
                groser__v1__get_shelf_request__init(g)
                g.pointee.shelf_uid = string(uid)
                g.pointee.known_store_version = known
            }
        case .listProducts(let r):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LIST_PRODUCTS
            p.pointee.list_products = message(Groser__V1__ListProductsRequest.self) { g in
                groser__v1__list_products_request__init(g)
                g.pointee.store_uid = string(r.storeUID)
                g.pointee.shelf_uid = string(r.shelfUID)
                g.pointee.page_size = r.pageSize
                g.pointee.page_token = string(r.pageToken)
            }
        default:
            return false
        }
        return true
    }
}

/// GetStore, GetShelf or ListProducts of an unpacked request, or nil for another method.
func decodeCatalogMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    switch c.method_case {
    case GROSER__V1__REQUEST__METHOD_GET_STORE:
        let g = c.get_store.pointee
        let selector: StoreSelector?
        switch g.selector_case {
        case GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_CODE: selector = .cityCode(str(g.city_code))
        case GROSER__V1__GET_STORE_REQUEST__SELECTOR_CITY_UID: selector = .cityUID(str(g.city_uid))
        case GROSER__V1__GET_STORE_REQUEST__SELECTOR_STORE_UID: selector = .storeUID(str(g.store_uid))
        default: selector = nil
        }
        return .getStore(selector: selector, includeProducts: g.include_products != 0,
                           knownStoreVersion: g.known_store_version)
    case GROSER__V1__REQUEST__METHOD_GET_SHELF:
        let g = c.get_shelf.pointee
        return .getShelf(shelfUID: str(g.shelf_uid), knownStoreVersion: g.known_store_version)
    case GROSER__V1__REQUEST__METHOD_LIST_PRODUCTS:
        let g = c.list_products.pointee
        return .listProducts(ProductPageRequest(storeUID: str(g.store_uid), shelfUID: str(g.shelf_uid),
                                                  pageSize: g.page_size, pageToken: str(g.page_token)))
    default:
        return nil
    }
}

/// The ServerInfo, ListCities, GetStore, GetShelf or ListProducts body of an
/// unpacked response, or nil for another body.
func decodeCatalogBody(_ c: Groser__V1__Response) -> ResponseBody? {
    switch c.body_case {
    case GROSER__V1__RESPONSE__BODY_SERVER_INFO:
        let b = c.server_info.pointee
        var methods: [String] = []
        if let m = b.methods { for i in 0..<b.n_methods { methods.append(str(m[i])) } }
        return .serverInfo(ServerInfo(serverVersion: str(b.server_version), protocolVersion: b.protocol_version,
                                      uptimeMilliseconds: b.uptime_ms, catalogVersion: b.catalog_version,
                                      methods: methods))
    case GROSER__V1__RESPONSE__BODY_LIST_CITIES:
        let b = c.list_cities.pointee
        return .listCities(CityList(cities: items(b.cities, b.n_cities).map(city), catalogVersion: b.catalog_version))
    case GROSER__V1__RESPONSE__BODY_GET_STORE:
        let b = c.get_store.pointee
        return .getStore(StoreCatalog(store: store(b.store), city: city(b.city), catalogVersion: b.catalog_version,
                                      storeVersion: b.store_version, notModified: b.not_modified != 0))
    case GROSER__V1__RESPONSE__BODY_GET_SHELF:
        let b = c.get_shelf.pointee
        return .getShelf(ShelfContents(shelf: shelf(b.shelf), storeUID: str(b.store_uid),
                                       departmentUID: str(b.department_uid), catalogVersion: b.catalog_version,
                                       storeVersion: b.store_version, notModified: b.not_modified != 0))
    case GROSER__V1__RESPONSE__BODY_LIST_PRODUCTS:
        let b = c.list_products.pointee
        return .listProducts(ProductPage(products: items(b.products, b.n_products).map(product),
                                         nextPageToken: str(b.next_page_token), storeVersion: b.store_version,
                                         totalSize: b.total_size))
    default:
        return nil
    }
}

// MARK: - Response bodies

/// Encodes response bodies (the message inside `Response.body`) with protobuf-c.
public enum BodyEncoder {
    public static func serverInfo(_ v: ServerInfo) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ServerInfoResponse.self) { p in
                groser__v1__server_info_response__init(p)
                p.pointee.server_version = arena.string(v.serverVersion)
                p.pointee.protocol_version = v.protocolVersion
                p.pointee.uptime_ms = v.uptimeMilliseconds
                p.pointee.catalog_version = v.catalogVersion
                p.pointee.n_methods = v.methods.count
                p.pointee.methods = arena.array(v.methods.map(arena.string))
            }
        }
    }

    public static func listCities(_ v: CityList) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ListCitiesResponse.self) { p in
                groser__v1__list_cities_response__init(p)
                p.pointee.n_cities = v.cities.count
                p.pointee.cities = arena.array(v.cities.map(arena.city))
                p.pointee.catalog_version = v.catalogVersion
            }
        }
    }

    public static func getStore(_ v: StoreCatalog) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__GetStoreResponse.self) { p in
                groser__v1__get_store_response__init(p)
                if !v.notModified {
                    p.pointee.store = arena.store(v.store)
                    p.pointee.city = arena.city(v.city)
                }
                p.pointee.catalog_version = v.catalogVersion
                p.pointee.store_version = v.storeVersion
                p.pointee.not_modified = v.notModified ? 1 : 0
            }
        }
    }

    public static func getShelf(_ v: ShelfContents) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__GetShelfResponse.self) { p in
                groser__v1__get_shelf_response__init(p)
                if !v.notModified { p.pointee.shelf = arena.shelf(v.shelf) }
                p.pointee.store_uid = arena.string(v.storeUID)
                p.pointee.department_uid = arena.string(v.departmentUID)
                p.pointee.catalog_version = v.catalogVersion
                p.pointee.store_version = v.storeVersion
                p.pointee.not_modified = v.notModified ? 1 : 0
            }
        }
    }

    public static func listProducts(_ v: ProductPage) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ListProductsResponse.self) { p in
                groser__v1__list_products_response__init(p)
                p.pointee.n_products = v.products.count
                p.pointee.products = arena.array(v.products.map(arena.product))
                p.pointee.next_page_token = arena.string(v.nextPageToken)
                p.pointee.store_version = v.storeVersion
                p.pointee.total_size = v.totalSize
            }
        }
    }

    /// One product's encoding (a `Product` message), as catalog segments keep it.
    public static func product(_ v: Product) -> [UInt8] {
        Arena.packed { $0.product(v) }
    }

    /// A `StoreSummary` message.
    public static func storeSummary(_ v: StoreSummary) -> [UInt8] {
        Arena.packed { $0.storeSummary(v) }
    }

    /// A `City` message.
    public static func city(_ v: City) -> [UInt8] {
        Arena.packed { $0.city(v) }
    }

    /// A `Department` message.
    public static func department(_ v: Department) -> [UInt8] {
        Arena.packed { $0.department(v) }
    }

    /// One shelf's encoding (a `Shelf` message, products included).
    public static func shelf(_ v: Shelf) -> [UInt8] {
        Arena.packed { $0.shelf(v) }
    }
}
