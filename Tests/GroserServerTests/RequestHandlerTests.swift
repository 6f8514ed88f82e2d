import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

@Suite("RequestHandler")
struct RequestHandlerTests {
    // MARK: ListCities

    @Test func listCitiesAnswersEveryCityOrderedByCode() throws {
        let r = try call(Request(id: 41, method: .listCities))
        #expect(r.id == 41)
        #expect(r.status == .ok)
        let list = try #require(r.cityList)
        #expect(list.catalogVersion == catalogVersion)
        #expect(list.cities == sample.cities)
        #expect(list.cities.map(\.code) == list.cities.map(\.code).sorted())
        #expect(list.cities.map(\.code).contains("SPB"))
    }

    // MARK: GetStore

    @Test(arguments: sample.cities.map { $0.code.lowercased() } + ["SPB", "Spb", "sPb", "MsK"])
    func getStoreByCityCodeIsCaseInsensitive(code: String) throws {
        let expectedCity = city(code: code.uppercased())
        let r = try call(Request(id: 5, method: .getStore(selector: .cityCode(code), includeProducts: false)))
        #expect(r.id == 5)
        #expect(r.status == .ok)
        let answer = try #require(r.storeCatalog)
        #expect(answer.store.uid == expectedCity.defaultStoreUID)
        #expect(answer.city == expectedCity)
        #expect(answer.catalogVersion == catalogVersion)
    }

    @Test(arguments: sample.cities.map(\.uid))
    func getStoreByCityUIDAnswersItsDefaultStore(uid: String) throws {
        let expectedCity = try #require(sample.cities.first { $0.uid == uid })
        let r = try call(Request(id: 6, method: .getStore(selector: .cityUID(uid), includeProducts: false)))
        #expect(r.status == .ok)
        let answer = try #require(r.storeCatalog)
        #expect(answer.store.uid == expectedCity.defaultStoreUID)
        #expect(answer.city == expectedCity)
    }

    /// Without products every shelf keeps its count but carries no products;
    /// the rest of the store is as the catalog has it.
    @Test(arguments: sample.stores.map(\.uid))
    func getStoreByStoreUIDWithoutProducts(uid: String) throws {
        let expected = try #require(sample.stores.first { $0.uid == uid })
        let r = try call(Request(id: 7, method: .getStore(selector: .storeUID(uid), includeProducts: false)))
        #expect(r.status == .ok)
        let answer = try #require(r.storeCatalog)
        #expect(answer.store.summary == expected.summary)
        #expect(answer.city.uid == expected.summary.cityUID)
        #expect(answer.city.stores.map(\.uid).contains(uid))
        let shelves = answer.store.departments.flatMap(\.shelves)
        #expect(shelves.count == 40)
        for shelf in shelves {
            #expect(shelf.productCount > 0, "\(shelf.uid)")
            #expect(shelf.products.isEmpty, "\(shelf.uid)")
        }
        #expect(answer.store == withoutProducts(expected))
    }

    /// With products every image URL is absolute: the base exactly once, then the stored path.
    @Test(arguments: sample.stores.map(\.uid))
    func getStoreWithProductsHasAbsoluteImageURLs(uid: String) throws {
        let expected = try #require(sample.stores.first { $0.uid == uid })
        let r = try call(Request(id: 8, method: .getStore(selector: .storeUID(uid), includeProducts: true)))
        #expect(r.status == .ok)
        let answer = try #require(r.storeCatalog)
        let products = answer.store.departments.flatMap(\.shelves).flatMap(\.products)
        #expect(products.count >= 500)
        for shelf in answer.store.departments.flatMap(\.shelves) {
            #expect(Int(shelf.productCount) == shelf.products.count)
        }
        for p in products {
            #expect(p.imageURL.hasPrefix(imageBase + "/"), "\(p.uid): \(p.imageURL)")
            #expect(p.imageURL.occurrences(of: imageBase) == 1, "\(p.uid): \(p.imageURL)")
            #expect(p.imageURL.occurrences(of: "://") == 1, "\(p.uid): \(p.imageURL)")
            #expect(!p.imageURL.dropFirst(imageBase.count).hasPrefix("//"), "\(p.uid): \(p.imageURL)")
        }
        let same = answer.store == withAbsoluteImages(expected)
        #expect(same, "store \(uid) differs from the catalog's (with absolute image URLs)")
    }

    @Test func getStoreByCityCodeWithProductsMatchesGetStoreByStoreUID() throws {
        let spb = city(code: "SPB")
        let byCode = try call(Request(id: 1, method: .getStore(selector: .cityCode("spb"), includeProducts: true)))
        let byStore = try call(Request(id: 1, method: .getStore(selector: .storeUID(spb.defaultStoreUID), includeProducts: true)))
        #expect(byCode == byStore)
        let products = try #require(byCode.storeCatalog).store.departments.flatMap(\.shelves).flatMap(\.products)
        #expect(!products.isEmpty)
    }

    // MARK: Image URLs

    @Test(arguments: [
        ("/img/products/p-1.jpg", "http://img.example:8080", "http://img.example:8080/img/products/p-1.jpg"),
        ("/img/products/p-1.jpg", "http://img.example:8080/", "http://img.example:8080/img/products/p-1.jpg"),
        ("/img/products/p-1.jpg", "http://img.example:8080///", "http://img.example:8080/img/products/p-1.jpg"),
        ("img/products/p-1.jpg", "http://img.example:8080", "http://img.example:8080/img/products/p-1.jpg"),
        ("img/products/p-1.jpg", "http://img.example:8080/", "http://img.example:8080/img/products/p-1.jpg"),
        ("/img/p.jpg", "https://cdn.example.com", "https://cdn.example.com/img/p.jpg"),
        ("https://cdn.example.com/p.jpg", "http://img.example:8080", "https://cdn.example.com/p.jpg"),
        ("http://other.example:9000/x/y.png", "http://img.example:8080/", "http://other.example:9000/x/y.png"),
        ("", "http://img.example:8080", ""),
        ("/img/p.jpg", "", "/img/p.jpg"),
        ("/img/p.jpg", "http://cdn.test:8080/groser/", "http://cdn.test:8080/groser/img/p.jpg"),
        ("//cdn.other/x.jpg", "https://cdn.test:8080/groser/", "https://cdn.other/x.jpg"),
        ("/img/r?to=http://x/y.jpg", "http://img.example:8080", "http://img.example:8080/img/r?to=http://x/y.jpg"),
        ("s3+x.y-z://bucket/p.jpg", "http://img.example:8080", "s3+x.y-z://bucket/p.jpg"),
        ("1http://x/p.jpg", "http://img.example:8080", "http://img.example:8080/1http://x/p.jpg"),
    ])
    func imageURLsBecomeAbsoluteOnce(url: String, base: String, expected: String) {
        let absolute = ImageURL.absolute(url, base: base)
        #expect(absolute == expected)
        // Applying it twice changes nothing: the base is never doubled.
        #expect(ImageURL.absolute(absolute, base: base) == expected)
    }

    @Test func anAlreadyAbsoluteImageURLIsServedUnchanged() throws {
        let shelfUID = "shf-t-1"
        let relative = Product(uid: "p-rel", name: "Хлеб", brand: "", unit: "g", unitSize: 400,
                               price: Money(minorUnits: 6990, currency: "RUB"), imageURL: "/img/p-rel.jpg",
                               outOfStock: false, oftenOutOfStock: false, shelfUID: shelfUID)
        var absolute = relative
        absolute.uid = "p-abs"
        absolute.name = "Молоко"
        absolute.imageURL = "https://cdn.example.com/img/p-abs.jpg"
        let summary = StoreSummary(uid: "store-t", name: "Тест", chain: "Тест", address: "Тест", cityUID: "city-t")
        let store = Store(summary: summary, departments: [
            Department(uid: "dep-t", name: "Отдел", shelves: [
                Shelf(uid: shelfUID, name: "Полка", productCount: 2, products: [absolute, relative]),
            ]),
        ])
        let catalog = Catalog(cities: [City(uid: "city-t", code: "TST", name: "Тест", stores: [summary], defaultStoreUID: "store-t")],
                              stores: [store])
        let handler = RequestHandler(catalog: EncodedCatalog(catalog: catalog, version: 3, imageBaseURL: "http://img.example:8080/",
                                                             serverVersion: "test"),
                                     startedAtNanoseconds: monotonicNanoseconds())
        let r = try call(Request(id: 1, method: .getShelf(shelfUID: shelfUID)), handler: handler)
        let products = try #require(r.shelfContents).shelf.products
        #expect(products.map(\.imageURL) == ["https://cdn.example.com/img/p-abs.jpg", "http://img.example:8080/img/p-rel.jpg"])
        let s = try call(Request(id: 2, method: .getStore(selector: .cityCode("tst"), includeProducts: true)), handler: handler)
        #expect(try #require(s.storeCatalog).store.departments[0].shelves[0].products.map(\.imageURL)
                == ["https://cdn.example.com/img/p-abs.jpg", "http://img.example:8080/img/p-rel.jpg"])
    }

    // MARK: GetShelf

    @Test(arguments: sample.stores.map(\.uid))
    func getShelfAnswersEveryShelfSortedByName(storeUID: String) throws {
        let store = withAbsoluteImages(try #require(sample.stores.first { $0.uid == storeUID }))
        for department in store.departments {
            for shelf in department.shelves {
                let r = try call(Request(id: 99, method: .getShelf(shelfUID: shelf.uid)))
                #expect(r.id == 99)
                #expect(r.status == .ok)
                let answer = try #require(r.shelfContents)
                #expect(answer.storeUID == storeUID)
                #expect(answer.departmentUID == department.uid)
                #expect(answer.catalogVersion == catalogVersion)
                #expect(answer.shelf == shelf)
                #expect(Int(answer.shelf.productCount) == answer.shelf.products.count)
                #expect(!answer.shelf.products.isEmpty)
                let names = answer.shelf.products.map(\.name)
                for (a, b) in zip(names, names.dropFirst()) {
                    #expect(a.precedesByCodePoint(b), "\(shelf.uid): \"\(a)\" before \"\(b)\"")
                }
                for p in answer.shelf.products {
                    #expect(p.shelfUID == shelf.uid)
                    #expect(p.imageURL.hasPrefix(imageBase + "/"))
                }
            }
        }
    }

    // MARK: Errors

    @Test(arguments: [
        Labeled("city code", (RequestMethod.getStore(selector: .cityCode("XXX"), includeProducts: false), "XXX")),
        Labeled("Cyrillic city code", (.getStore(selector: .cityCode("Атлантида"), includeProducts: true), "Атлантида")),
        Labeled("city uid", (.getStore(selector: .cityUID("city-xyz"), includeProducts: false), "city-xyz")),
        Labeled("city code given as uid", (.getStore(selector: .cityUID("SPB"), includeProducts: false), "SPB")),
        Labeled("store uid", (.getStore(selector: .storeUID("store-nowhere-1"), includeProducts: false), "store-nowhere-1")),
        Labeled("store uid in another case", (.getStore(selector: .storeUID("STORE-MSK-1"), includeProducts: false), "STORE-MSK-1")),
        Labeled("shelf uid", (.getShelf(shelfUID: "shf-nope"), "shf-nope")),
        Labeled("store uid as shelf uid", (.getShelf(shelfUID: "store-msk-1"), "store-msk-1")),
    ])
    func unknownThingsAreNotFoundAndNamed(_ c: Labeled<(RequestMethod, String)>) throws {
        let (method, named) = c.value
        let r = try call(Request(id: 314, method: method))
        #expect(r.id == 314)
        #expect(r.status.code == .notFound)
        #expect(r.status.message.contains("\"\(named)\""), "message: \(r.status.message)")
        #expect(r.body == .none)
    }

    @Test func aLongUnknownCodeIsCutInTheMessage() throws {
        let code = String(repeating: "Я", count: 200)
        let r = try call(Request(id: 1, method: .getStore(selector: .cityCode(code), includeProducts: false)))
        #expect(r.status.code == .notFound)
        #expect(r.status.message.contains(String(repeating: "Я", count: 64)))
        #expect(!r.status.message.contains(String(repeating: "Я", count: 65)))
    }

    /// The response for an unknown city, byte for byte as docs/PROTOCOL.md §1 shows it.
    @Test func theNotFoundFrameMatchesTheProtocolDocument() {
        let request: [UInt8] = [0x08, 0x02, 0x10, 0xf4, 0x03, 0x62, 0x05, 0x0a, 0x03, 0x58, 0x58, 0x58]
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        var out: [UInt8] = []
        let handled = request.withUnsafeBytes { handler.respond(toFrame: $0, receivedAt: monotonicNanoseconds(), peerIsOperator: { true }, into: &out) }
        guard case .answered = handled else { Issue.record("deferred"); return }
        let expected: [UInt8] = [0x00, 0x00, 0x00, 0x3f, 0x08, 0x02, 0x12, 0x3b, 0x08, 0x05, 0x12, 0x37]
            + Array("No city has the code \"XXX\"; ListCities lists the codes.".utf8)
        #expect(out == expected)
    }

    @Test(arguments: [
        Labeled("no selector", RequestMethod.getStore(selector: nil, includeProducts: false)),
        Labeled("no selector, with products", .getStore(selector: nil, includeProducts: true)),
        Labeled("empty city code", .getStore(selector: .cityCode(""), includeProducts: false)),
        Labeled("empty shelf uid", .getShelf(shelfUID: "")),
    ])
    func missingArgumentsAreInvalid(_ c: Labeled<RequestMethod>) throws {
        let r = try call(Request(id: 1_000_000_007, method: c.value))
        #expect(r.id == 1_000_000_007)
        #expect(r.status.code == .invalidArgument)
        #expect(!r.status.message.isEmpty)
        #expect(r.body == .none)
    }

    @Test func anUnknownMethodIsUnimplementedWithTheRequestsID() throws {
        let r = try call(Request(id: 77, method: .unknown))
        #expect(r.id == 77)
        #expect(r.status.code == .unimplemented)
        #expect(!r.status.message.isEmpty)
        #expect(r.body == .none)
    }

    @Test func aMethodFromANewerClientIsUnimplementedWithItsID() throws {
        // id 77, deadline 1000, then field 99 (length-delimited, empty): a method this server does not know.
        let r = try respond(toFrame: [0x08, 77, 0x10, 0xE8, 0x07, 0x9A, 0x06, 0x00])
        #expect(r.id == 77)
        #expect(r.status.code == .unimplemented)
        #expect(r.body == .none)
    }

    @Test func anEmptyFrameHasID0AndIsRefused() throws {
        let r = try respond(toFrame: [])
        #expect(r.id == 0)
        #expect(r.status.code == .invalidArgument)
        #expect(r.status.message.contains("id 0 is reserved"))
    }

    @Test(arguments: [RequestMethod.serverInfo, .listCities, .openSession,
                      .getCart(session: "0123456789abcdef0123456789abcdef", storeUID: "store-spb-1")])
    func aRequestWithID0IsRefusedWhateverItsMethod(method: RequestMethod) throws {
        var out: [UInt8] = []
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        let handled = handler.respond(to: Request(id: 0, method: method), receivedAt: monotonicNanoseconds(), into: &out)
        guard case .answered = handled else { Issue.record("id 0 was deferred to the commit queue"); return }
        let r = try #require(try responses(in: out).first)
        #expect(r.id == 0 && r.status.code == .invalidArgument && r.body == .none)
    }

    @Test(arguments: [
        Labeled("truncated varint", [0x08, 0xFF] as [UInt8]),
        Labeled("length past the end", [0x08, 0x05, 0x62, 0x05, 0x0A]),
        Labeled("wire type 7", [0x0F, 0x01, 0x02]),
        Labeled("text", Array("GET / HTTP/1.1\r\n\r\n".utf8)),
    ])
    func aGarbageFrameIsInvalidWithID0(_ c: Labeled<[UInt8]>) throws {
        let r = try respond(toFrame: c.value)
        #expect(r.id == 0)
        #expect(r.status.code == .invalidArgument)
        #expect(!r.status.message.isEmpty)
        #expect(r.body == .none)
    }

    /// 4 MiB of 2-byte unknown fields cost protobuf-c's unpack over 150 MB;
    /// such a frame is refused unread, like a malformed one.
    @Test(arguments: [Request.maximumFieldCount, 2_000_000])
    func aRequestWithTooManyFieldsIsInvalidWithID0(unknownFields: Int) throws {
        var frame: [UInt8] = [0x08, 0x07, 0x52, 0x00]  // id 7, ServerInfo
        frame.reserveCapacity(frame.count + 2 * unknownFields)
        for _ in 0..<unknownFields { frame += [0x18, 0x01] }
        let r = try respond(toFrame: frame)
        #expect(r.id == 0)
        #expect(r.status.code == .invalidArgument)
        #expect(r.status.message.contains("more than \(Request.maximumFieldCount) fields"), "\(r.status.message)")
        #expect(r.body == .none)
    }

    /// A non-operator's ImportCatalog is refused from its envelope, before
    /// it is unpacked: a frame protobuf-c could not even read gets the
    /// refusal with its id.
    @Test func aNonOperatorsOperatorMethodIsRefusedUnread() throws {
        var frame: [UInt8] = [0x08, 0x07, 0xC2, 0x01, 0x04, 0x12, 0x80, 0x80]  // id 7, ImportCatalog, a cut record
        var asked = 0
        var out: [UInt8] = []
        let refused = frame.withUnsafeBytes { RequestHandler.decode(frame: $0, peerIsOperator: { asked += 1; return false }, into: &out) }
        #expect(refused == nil && asked == 1)
        let r = try #require(try responses(in: out).first)
        #expect(r.id == 7 && r.status.code == .permissionDenied)
        #expect(r.status.message == "Only groserd's own user, root or an admin group member may call ImportCatalog.")
        // A frame naming no operators' method is read without asking.
        frame = Request(id: 8, method: .serverInfo).encoded()
        out = []
        let read = frame.withUnsafeBytes { RequestHandler.decode(frame: $0, peerIsOperator: { asked += 1; return false }, into: &out) }
        #expect(read?.id == 8 && asked == 1, "ServerInfo needs no operator")
    }

    /// The raised field limit is an operator's: anyone else's frame that
    /// carries an ImportCatalog field but names another method last keeps 256.
    @Test func onlyAnOperatorsImportGetsTheRaisedFieldLimit() throws {
        var records: [UInt8] = []
        for _ in 0..<1000 { records += [0x12, 0x00] }
        var frame: [UInt8] = [0x08, 0x07, 0xC2, 0x01, 0xD0, 0x0F] + records  // ImportCatalog, 2000 bytes
        frame += [0x52, 0x00]  // then ServerInfo, which wins
        let r = try respond(toFrame: frame, peerIsOperator: false)
        #expect(r.id == 0 && r.status.code == .invalidArgument)
        #expect(r.status.message.contains("more than \(Request.maximumFieldCount) fields"), "\(r.status.message)")
    }

    @Test func aRequestWithAFewUnknownFieldsIsAnswered() throws {
        var frame: [UInt8] = [0x08, 0x07, 0x52, 0x00]
        for _ in 0..<(Request.maximumFieldCount - 2) { frame += [0x18, 0x01] }
        let r = try respond(toFrame: frame)
        #expect(r.id == 7)
        #expect(r.status.isOK)
        #expect(r.serverInfo != nil)
    }

    // MARK: ServerInfo

    @Test func serverInfoDescribesTheServer() throws {
        let r = try call(Request(id: 3, method: .serverInfo))
        #expect(r.id == 3)
        #expect(r.status == .ok)
        let info = try #require(r.serverInfo)
        #expect(info.protocolVersion == 1)
        #expect(info.serverVersion == ProtocolInfo.serverVersion)
        #expect(info.catalogVersion == catalogVersion)
        // The v1 methods, in order, each once (later versions may list more after them).
        #expect(Array(info.methods.prefix(4)) == ["ServerInfo", "ListCities", "GetStore", "GetShelf"])
        #expect(Set(info.methods).count == info.methods.count)
        #expect(info.uptimeMilliseconds < 60_000)
    }

    @Test func serverInfoCountsUptimeFromTheStart() throws {
        let started = monotonicNanoseconds() - 2_500_000_000
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: started)
        let before = (monotonicNanoseconds() - started) / 1_000_000
        let info = try #require(try call(Request(id: 1, method: .serverInfo), handler: handler).serverInfo)
        let after = (monotonicNanoseconds() - started) / 1_000_000
        #expect(info.uptimeMilliseconds >= before)
        #expect(info.uptimeMilliseconds <= after)
        #expect(info.catalogVersion == catalogVersion)
        #expect(info.protocolVersion == 1)
    }

    // MARK: Deadlines

    @Test(arguments: [
        Labeled("list cities", RequestMethod.listCities),
        Labeled("server info", .serverInfo),
        Labeled("store", .getStore(selector: .cityCode("MSK"), includeProducts: true)),
        Labeled("shelf", .getShelf(shelfUID: "shf-msk-1-01-1")),
        Labeled("unknown city", .getStore(selector: .cityCode("XXX"), includeProducts: false)),
    ])
    func aDeadlineAlreadyPassedIsExceeded(_ c: Labeled<RequestMethod>) throws {
        let longAgo = monotonicNanoseconds() - 10_000_000_000
        let r = try call(Request(id: 12, deadlineMilliseconds: 1, method: c.value), receivedAt: longAgo)
        #expect(r.id == 12)
        #expect(r.status.code == .deadlineExceeded)
        #expect(r.body == .none)
    }

    @Test func aDeadlineNotYetPassedOrNoneIsServed() throws {
        let longAgo = monotonicNanoseconds() - 10_000_000_000
        // No deadline: however long ago it was read, it is served.
        let none = try call(Request(id: 1, deadlineMilliseconds: 0, method: .listCities), receivedAt: longAgo)
        #expect(none.status == .ok)
        #expect(none.cityList != nil)
        // A budget of 60 s from 10 s ago has not run out.
        let ample = try call(Request(id: 2, deadlineMilliseconds: 60_000, method: .listCities), receivedAt: longAgo)
        #expect(ample.status == .ok)
        // A budget of 5 s from 10 s ago has.
        let short = try call(Request(id: 3, deadlineMilliseconds: 5_000, method: .listCities), receivedAt: longAgo)
        #expect(short.status.code == .deadlineExceeded)
    }

    // MARK: Several requests in one buffer

    @Test func severalRequestsAppendedToOneBufferComeBackAsSeparateFramesInOrder() throws {
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        let requests: [Request] = [
            Request(id: 10, method: .serverInfo),
            Request(id: 11, method: .listCities),
            Request(id: 12, method: .getStore(selector: .cityCode("spb"), includeProducts: true)),
            Request(id: 13, method: .getStore(selector: .cityCode("XXX"), includeProducts: false)),
            Request(id: 14, method: .getShelf(shelfUID: "shf-msk-1-01-1")),
            Request(id: 15, method: .unknown),
            Request(id: 16, method: .getStore(selector: nil, includeProducts: false)),
            Request(id: 17, method: .getStore(selector: .storeUID("store-msk-1"), includeProducts: false)),
            Request(id: 18, method: .listCities),
        ]
        var out: [UInt8] = []
        for request in requests {
            let handled = handler.respond(to: request, receivedAt: monotonicNanoseconds(), into: &out)
            guard case .answered = handled else { Issue.record("request \(request.id) was deferred"); return }
        }
        // A garbage frame in the middle of the stream gets its own answer too.
        let garbage: [UInt8] = [0x08, 0xFF]
        let handled = garbage.withUnsafeBytes { handler.respond(toFrame: $0, receivedAt: monotonicNanoseconds(), peerIsOperator: { true }, into: &out) }
        guard case .answered = handled else { Issue.record("garbage was deferred"); return }

        let answers = try responses(in: out)
        #expect(answers.map(\.id) == requests.map(\.id) + [0])
        #expect(answers.map(\.status.code) == [.ok, .ok, .ok, .notFound, .ok, .unimplemented, .invalidArgument, .ok, .ok, .invalidArgument])
        #expect(answers[0].serverInfo != nil)
        #expect(answers[1].cityList?.cities == sample.cities)
        #expect(answers[2].storeCatalog?.store.uid == city(code: "SPB").defaultStoreUID)
        #expect(answers[4].shelfContents?.shelf.uid == "shf-msk-1-01-1")
        #expect(answers[7].storeCatalog?.store.uid == "store-msk-1")
        #expect(answers[1] == answers[8].withID(11))
    }
}

private extension Response {
    func withID(_ id: UInt64) -> Response {
        var r = self
        r.id = id
        return r
    }
}
