import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// ListStores, answered from the encoded catalog (StoreListAnswer.swift).
@Suite("ListStores")
struct ListStoresTests {
    /// What the answer for `city` must be, from the sample catalog itself.
    func expected(_ city: City) -> StoreList {
        let stores = city.stores.sorted { $0.uid < $1.uid }.map { s in
            StoreListing(summary: s, isDefault: s.uid == city.defaultStoreUID,
                         storeVersion: encodedSample.stores[s.uid]!.version)
        }
        return StoreList(stores: stores, cityUID: city.uid, catalogVersion: catalogVersion)
    }

    @Test(arguments: sample.cities)
    func byCodeAndByUIDAnswerTheCitysStoresOrderedByUID(_ city: City) throws {
        for selector in [CitySelector.code(city.code), .code(city.code.lowercased()), .uid(city.uid)] {
            let r = try call(Request(id: 9, method: .listStores(city: selector)))
            #expect(r.id == 9 && r.status == .ok)
            guard case .listStores(let list) = r.body else {
                Issue.record("\(r.body)")
                continue
            }
            #expect(list == expected(city), "\(selector)")
            #expect(list.stores.filter(\.isDefault).map(\.summary.uid) == [city.defaultStoreUID])
        }
    }

    /// The answer written by hand is the bytes protobuf-c writes for it.
    @Test func theHandWrittenBodyIsProtobufCsEncoding() throws {
        let city = try #require(sample.cities.first { $0.code == "SPB" })
        var out: [UInt8] = []
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        _ = Request(id: 3, method: .listStores(city: .code("SPB"))).encoded().withUnsafeBytes {
            handler.respond(toFrame: $0, receivedAt: monotonicNanoseconds(), peerIsOperator: { false }, into: &out)
        }
        #expect(out == Response(id: 3, body: .listStores(expected(city))).encodedFrame())
    }

    @Test(arguments: [
        Labeled("no selector", (CitySelector?.none, StatusCode.invalidArgument, "ListStores needs one of city_code or city_uid.")),
        Labeled("empty code", (.code(""), .invalidArgument, "ListStores' city_code is empty.")),
        Labeled("empty uid", (.uid(""), .invalidArgument, "ListStores' city_uid is empty.")),
        Labeled("unknown code", (.code("XXX"), .notFound, "No city has the code \"XXX\"; ListCities lists the codes.")),
        Labeled("unknown uid", (.uid("city-x"), .notFound, "No city has the uid \"city-x\".")),
    ])
    func refusals(_ c: Labeled<(CitySelector?, StatusCode, String)>) throws {
        let r = try call(Request(id: 4, method: .listStores(city: c.value.0)))
        #expect(r.status == Status(c.value.1, c.value.2))
        #expect(r.body == .none)
    }
}
