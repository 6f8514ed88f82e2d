import GroserWire

/// ListStores: one city's stores from the encoded catalog, each with the
/// summary GetStore sends, whether it is the city's default and its version.
extension RequestHandler {
    func answerStores(_ id: UInt64, _ city: CitySelector?, _ out: inout [UInt8]) {
        let cityUID: String
        let defaultStore: String
        switch city {
        case nil:
            fail(id, .invalidArgument, "ListStores needs one of city_code or city_uid.", &out)
            return
        case .code(let code):
            guard !code.isEmpty else { return fail(id, .invalidArgument, "ListStores' city_code is empty.", &out) }
            guard let uid = catalog.defaultStoreByCityCode[code.uppercased()], let store = catalog.stores[uid] else {
                return fail(id, .notFound, "No city has the code \"\(printable(code))\"; ListCities lists the codes.", &out)
            }
            (cityUID, defaultStore) = (store.cityUID, uid)
        case .uid(let uid):
            guard !uid.isEmpty else { return fail(id, .invalidArgument, "ListStores' city_uid is empty.", &out) }
            guard let store = catalog.defaultStoreByCityUID[uid] else {
                return fail(id, .notFound, "No city has the uid \"\(printable(uid))\".", &out)
            }
            (cityUID, defaultStore) = (uid, store)
        }
        // StoreListing's field 1 is a StoreSummary, as Store's is: the
        // store's `summaryField` is copied whole.
        var body: [UInt8] = []
        for store in catalog.stores.values.filter({ $0.cityUID == cityUID }).sorted(by: { $0.uid < $1.uid }) {
            var listing = store.summaryField
            ProtoWriter.appendVarintField(2, store.uid == defaultStore ? 1 : 0, to: &listing)
            ProtoWriter.appendVarintField(3, store.version, to: &listing)
            ProtoWriter.appendLengthDelimitedHeader(1, listing.count, to: &body)
            body += listing
        }
        ProtoWriter.appendLengthDelimitedHeader(2, cityUID.utf8.count, to: &body)
        body += cityUID.utf8
        ProtoWriter.appendVarintField(3, catalog.version, to: &body)
        ResponseFrameWriter.appendOK(id: id, field: .listStores, body: body, to: &out)
    }
}
