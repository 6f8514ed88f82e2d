import CGroserProto
import CProtobufC

// protobuf-c conversion of ListStores. groserd writes its answer by hand from
// the encoded catalog (StoreListAnswer.swift); `BodyEncoder.listStores` is
// the reference encoding tests compare with.

extension Arena {
    /// Fills the request's method for ListStores; false for others.
    func listStoresMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        guard case .listStores(let city) = method else { return false }
        p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LIST_STORES
        p.pointee.list_stores = message(Groser__V1__ListStoresRequest.self) { g in
            groser__v1__list_stores_request__init(g)
            switch city {
            case .code(let s)?:
                g.pointee.selector_case = GROSER__V1__LIST_STORES_REQUEST__SELECTOR_CITY_CODE
                g.pointee.city_code = string(s)
            case .uid(let s)?:
                g.pointee.selector_case = GROSER__V1__LIST_STORES_REQUEST__SELECTOR_CITY_UID
                g.pointee.city_uid = string(s)
            case nil:
                break
            }
        }
        return true
    }

    func storeListing(_ v: StoreListing) -> UnsafeMutablePointer<Groser__V1__StoreListing> {
        message(Groser__V1__StoreListing.self) { p in
            groser__v1__store_listing__init(p)
            p.pointee.summary = storeSummary(v.summary)
            p.pointee.is_default = v.isDefault ? 1 : 0
            p.pointee.store_version = v.storeVersion
        }
    }
}

/// ListStores of an unpacked request, or nil for another method.
func decodeListStoresMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    guard c.method_case == GROSER__V1__REQUEST__METHOD_LIST_STORES else { return nil }
    let g = c.list_stores.pointee
    switch g.selector_case {
    case GROSER__V1__LIST_STORES_REQUEST__SELECTOR_CITY_CODE: return .listStores(city: .code(str(g.city_code)))
    case GROSER__V1__LIST_STORES_REQUEST__SELECTOR_CITY_UID: return .listStores(city: .uid(str(g.city_uid)))
    default: return .listStores(city: nil)
    }
}

/// The ListStores body of an unpacked response, or nil for another body.
func decodeListStoresBody(_ c: Groser__V1__Response) -> ResponseBody? {
    guard c.body_case == GROSER__V1__RESPONSE__BODY_LIST_STORES else { return nil }
    let b = c.list_stores.pointee
    let stores = items(b.stores, b.n_stores).map { s in
        StoreListing(summary: storeSummary(s.pointee.summary), isDefault: s.pointee.is_default != 0,
                     storeVersion: s.pointee.store_version)
    }
    return .listStores(StoreList(stores: stores, cityUID: str(b.city_uid), catalogVersion: b.catalog_version))
}

extension BodyEncoder {
    /// A ListStoresResponse's encoding.
    public static func listStores(_ v: StoreList) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ListStoresResponse.self) { p in
                groser__v1__list_stores_response__init(p)
                p.pointee.n_stores = v.stores.count
                p.pointee.stores = arena.array(v.stores.map(arena.storeListing))
                p.pointee.city_uid = arena.string(v.cityUID)
                p.pointee.catalog_version = v.catalogVersion
            }
        }
    }
}
