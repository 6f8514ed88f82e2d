import GroserWire

/// ListStores: one city's stores from the encoded catalog, each with the
/// summary GetStore sends, whether it is the city's default and its version.
extension RequestHandler {
    func answerStores(_ id: UInt64, _ city: CitySelector?, _ out: inout [UInt8]) {
        guard let city else {
            return fail(id, .invalidArgument, "ListStores needs one of city_code or city_uid.", &out)
        }
        guard let defaultStore = defaultStore(of: city, possessive: "ListStores'", id, &out) else { return }
        let cityUID: String
        switch city {
        case .uid(let uid): cityUID = uid
        case .code(let code):
            guard let store = catalog.stores[defaultStore] else {
                return fail(id, .notFound, "No city has the code \"\(printable(code))\"; ListCities lists the codes.", &out)
            }
            cityUID = store.cityUID
        }
        // StoreListing's summary is a StoreSummary, as Store's is: the
        // store's `summaryField` (tag included) is copied whole.
        var body: [UInt8] = []
        for store in catalog.stores.values.filter({ $0.cityUID == cityUID }).sorted(by: { $0.uid < $1.uid }) {
            var listing = store.summaryField
            ProtoWriter.appendVarintField(FieldNumbers.StoreListing.isDefault, store.uid == defaultStore ? 1 : 0, to: &listing)
            ProtoWriter.appendVarintField(FieldNumbers.StoreListing.storeVersion, store.version, to: &listing)
            ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.ListStoresResponse.stores, listing.count, to: &body)
            body += listing
        }
        ProtoWriter.appendLengthDelimitedHeader(FieldNumbers.ListStoresResponse.cityUID, cityUID.utf8.count, to: &body)
        body += cityUID.utf8
        ProtoWriter.appendVarintField(FieldNumbers.ListStoresResponse.catalogVersion, catalog.version, to: &body)
        ResponseFrameWriter.appendOK(id: id, field: .listStores, body: body, to: &out)
    }
}
