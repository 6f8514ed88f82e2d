import GroserWire
import Testing

// MARK: - Fixtures: realistic model values

private func product(_ n: Int, name: String, minorUnits: Int64, currency: String = "RUB",
                     outOfStock: Bool = false, often: Bool = false) -> Product {
    Product(uid: "prd-msk-1-\(n)", name: name, brand: "Простоквашино", unit: "ml", unitSize: 930,
            price: Money(minorUnits: minorUnits, currency: currency),
            imageURL: "http://localhost:8080/img/products/prd-msk-1-\(n).jpg",
            outOfStock: outOfStock, oftenOutOfStock: often, shelfUID: "shf-msk-1-01-1")
}

private let products: [Product] = [
    product(1, name: "Кефир Простоквашино 2,5%", minorUnits: 8990),
    product(2, name: "Молоко «Домик в деревне» 3,2% — ёмкость 🥛", minorUnits: Int64.max, outOfStock: true),
    product(3, name: "Ряженка", minorUnits: -1, often: true),
    product(4, name: "Сметана 20%", minorUnits: Int64.min, currency: "USD", outOfStock: true, often: true),
    product(5, name: "Творог", minorUnits: 0),
    Product(uid: "prd-x", name: "", brand: "", unit: "pcs", unitSize: UInt32.max,
            price: Money(minorUnits: 1, currency: ""), imageURL: "", outOfStock: false,
            oftenOutOfStock: false, shelfUID: ""),
]

private let fullShelf = Shelf(uid: "shf-msk-1-01-1", name: "Молоко и кефир",
                              productCount: UInt32(products.count), products: products)
private let bareShelf = Shelf(uid: "shf-msk-1-01-2", name: "Сыры", productCount: 14)
private let emptyShelf = Shelf(uid: "shf-msk-1-01-3", name: "Пусто", productCount: 0)

private let mskStores = [
    StoreSummary(uid: "store-msk-1", name: "Перекрёсток на Тверской", chain: "Перекрёсток",
                 address: "Москва, ул. Тверская, 8", cityUID: "city-msk"),
    StoreSummary(uid: "store-msk-2", name: "Азбука вкуса", chain: "Азбука вкуса",
                 address: "Москва, Кутузовский просп., 24", cityUID: "city-msk"),
]
private let moscow = City(uid: "city-msk", code: "MSK", name: "Москва", stores: mskStores,
                          defaultStoreUID: "store-msk-1")
private let petersburg = City(uid: "city-spb", code: "SPB", name: "Санкт-Петербург",
                              stores: [StoreSummary(uid: "store-spb-1", name: "Лента", chain: "Лента",
                                                    address: "Санкт-Петербург, Невский просп., 1",
                                                    cityUID: "city-spb")],
                              defaultStoreUID: "store-spb-1")

private let store = Store(summary: mskStores[0], departments: [
    Department(uid: "dep-msk-1-01", name: "Молочные продукты", shelves: [fullShelf, bareShelf, emptyShelf]),
    Department(uid: "dep-msk-1-02", name: "Хлеб и выпечка", shelves: []),
])

/// A label for a test case, so the table's rows are told apart in reports.
struct Labeled<Value: Sendable>: Sendable, CustomTestStringConvertible {
    var label: String
    var value: Value
    init(_ label: String, _ value: Value) { self.label = label; self.value = value }
    var testDescription: String { label }
}

private let requestCases: [Labeled<Request>] = [
    Labeled("serverInfo", Request(id: 1, method: .serverInfo)),
    Labeled("serverInfo id 0", Request(id: 0, method: .serverInfo)),
    Labeled("listCities extremes", Request(id: .max, deadlineMilliseconds: .max, method: .listCities)),
    Labeled("getStore city code", Request(id: 2, deadlineMilliseconds: 500,
                                          method: .getStore(selector: .cityCode("SPB"), includeProducts: false))),
    Labeled("getStore city code with products", Request(id: 3, method: .getStore(selector: .cityCode("msk"), includeProducts: true))),
    Labeled("getStore empty city code", Request(id: 4, method: .getStore(selector: .cityCode(""), includeProducts: false))),
    Labeled("getStore city uid", Request(id: 5, method: .getStore(selector: .cityUID("city-spb"), includeProducts: false))),
    Labeled("getStore city uid with products", Request(id: 6, method: .getStore(selector: .cityUID("город-спб"), includeProducts: true))),
    Labeled("getStore store uid", Request(id: 7, method: .getStore(selector: .storeUID("store-msk-2"), includeProducts: false))),
    Labeled("getStore store uid with products", Request(id: 8, method: .getStore(selector: .storeUID("store-msk-2"), includeProducts: true))),
    Labeled("getStore no selector", Request(id: 9, method: .getStore(selector: nil, includeProducts: false))),
    Labeled("getStore no selector with products", Request(id: 10, method: .getStore(selector: nil, includeProducts: true))),
    Labeled("getShelf", Request(id: 300, deadlineMilliseconds: 1, method: .getShelf(shelfUID: "shf-msk-1-01-1"))),
    Labeled("getShelf UTF-8", Request(id: 301, method: .getShelf(shelfUID: "полка-🥛"))),
    Labeled("getShelf empty uid", Request(id: 302, method: .getShelf(shelfUID: ""))),
    Labeled("unknown", Request(id: 77, deadlineMilliseconds: 250, method: .unknown)),
]

private let responseCases: [Labeled<Response>] = [
    Labeled("serverInfo", Response(id: 1, body: .serverInfo(ServerInfo(
        serverVersion: "groserd 0.1.0", protocolVersion: 1, uptimeMilliseconds: 5321, catalogVersion: 1,
        methods: ["ServerInfo", "ListCities", "GetStore", "GetShelf"])))),
    Labeled("serverInfo extremes", Response(id: .max, body: .serverInfo(ServerInfo(
        serverVersion: "", protocolVersion: .max, uptimeMilliseconds: .max, catalogVersion: .max, methods: [])))),
    Labeled("listCities", Response(id: 2, body: .listCities(CityList(cities: [moscow, petersburg], catalogVersion: 7)))),
    Labeled("listCities empty", Response(id: 3, body: .listCities(CityList(cities: [], catalogVersion: 0)))),
    Labeled("getStore with products", Response(id: 4, body: .getStore(StoreCatalog(store: store, city: moscow, catalogVersion: 7)))),
    Labeled("getStore without products", Response(id: 5, body: .getStore(StoreCatalog(
        store: Store(summary: mskStores[1], departments: [Department(uid: "dep-msk-2-01", name: "Бакалея", shelves: [bareShelf])]),
        city: moscow, catalogVersion: 8)))),
    Labeled("getShelf", Response(id: 6, body: .getShelf(ShelfContents(
        shelf: fullShelf, storeUID: "store-msk-1", departmentUID: "dep-msk-1-01", catalogVersion: 1)))),
    Labeled("getShelf id 0", Response(id: 0, body: .getShelf(ShelfContents(
        shelf: emptyShelf, storeUID: "store-msk-1", departmentUID: "dep-msk-1-01", catalogVersion: 1)))),
    Labeled("OK without body", Response(id: 12)),
    Labeled("NOT_FOUND", Response(id: 2, status: Status(.notFound, "No city has the code \"XXX\"; ListCities lists the codes."))),
    Labeled("INVALID_ARGUMENT id 0", Response(id: 0, status: Status(.invalidArgument, "The frame is not a valid groser.v1.Request message."))),
    Labeled("RESOURCE_EXHAUSTED id 0", Response(id: 0, status: Status(.resourceExhausted, "Кадр слишком велик: 5000000 байт"))),
    Labeled("UNIMPLEMENTED no message", Response(id: 9, status: Status(.unimplemented))),
    Labeled("DEADLINE_EXCEEDED", Response(id: .max, status: Status(.deadlineExceeded, "late"))),
    Labeled("UNAUTHENTICATED long message", Response(id: 1, status: Status(.unauthenticated, String(repeating: "ж", count: 5000)))),
    Labeled("unknown code 42", Response(id: 5, status: Status(StatusCode(rawValue: 42), "from a newer server"))),
]

/// Splits one whole frame into its body, checking the header on the way.
private func body(ofFrame frame: [UInt8]) throws -> ArraySlice<UInt8> {
    try #require(frame.count >= Framing.headerSize)
    let length = frame.prefix(4).reduce(0) { $0 << 8 | Int($1) }
    #expect(length == frame.count - Framing.headerSize, "the length prefix must equal the body length")
    return frame.dropFirst(Framing.headerSize)
}

// MARK: - Tests

@Suite("Request and Response encoding")
struct MessagesTests {
    @Test(arguments: requestCases)
    func requestRoundTrips(_ c: Labeled<Request>) throws {
        let bytes = c.value.encoded()
        #expect(try Request.decode(bytes) == c.value)
        // Also through a frame and the decoder, as the server reads it.
        var decoder = FrameDecoder()
        decoder.append(Framing.frame(bytes))
        let frame = try #require(try decoder.next())
        #expect(try Request.decode(frame) == c.value)
    }

    /// The byte examples of docs/PROTOCOL.md §1, which other clients are checked against.
    @Test func requestEncodingMatchesTheProtocolDocument() {
        #expect(Framing.frame(Request(id: 1, method: .serverInfo).encoded())
                == [0x00, 0x00, 0x00, 0x04, 0x08, 0x01, 0x52, 0x00])
        let getStore = Request(id: 2, deadlineMilliseconds: 500,
                               method: .getStore(selector: .cityCode("XXX"), includeProducts: false))
        #expect(Framing.frame(getStore.encoded())
                == [0x00, 0x00, 0x00, 0x0c, 0x08, 0x02, 0x10, 0xf4, 0x03, 0x62, 0x05, 0x0a, 0x03, 0x58, 0x58, 0x58])
    }

    @Test func anEmptyBodyIsARequestWithNoMethod() throws {
        #expect(try Request.decode([UInt8]()) == Request(id: 0, method: .unknown))
    }

    @Test func aMethodFromANewerClientDecodesAsUnknownWithItsId() throws {
        // id 77, then field 99 (length-delimited, empty): a method number no build has.
        let bytes: [UInt8] = [0x08, 77, 0x9A, 0x06, 0x00]
        #expect(try Request.decode(bytes) == Request(id: 77, method: .unknown))
    }

    @Test(arguments: [
        Labeled("truncated varint", [0x08, 0xFF, 0xFF] as [UInt8]),
        Labeled("overlong varint", [0x08] + [UInt8](repeating: 0xFF, count: 11)),
        Labeled("length past the end", [0x62, 0x05, 0x0A]),
        Labeled("nested length past the end", [0x62, 0x03, 0x0A, 0x09, 0x41]),
        Labeled("wire type 7", [0x0F, 0x00]),
        Labeled("field number 0", [0x00, 0x01]),
        Labeled("tag with no value", [0x08]),
    ])
    func garbageIsNotARequest(_ c: Labeled<[UInt8]>) {
        #expect(throws: WireDecodingError.self) { _ = try Request.decode(c.value) }
        #expect(throws: WireDecodingError.self) { _ = try Response.decode(c.value) }
    }

    @Test(arguments: responseCases)
    func responseRoundTripsThroughItsFrame(_ c: Labeled<Response>) throws {
        let frame = c.value.encodedFrame()
        let decoded = try Response.decode(try body(ofFrame: frame))
        #expect(decoded == c.value)
    }

    @Test func responseFramesSplitByTheDecoderComeBackInOrder() throws {
        var stream: [UInt8] = []
        for c in responseCases { stream += c.value.encodedFrame() }
        var decoder = FrameDecoder()
        decoder.append(stream)
        let decoded = try decoder.drain().map { try Response.decode($0) }
        #expect(decoded == responseCases.map(\.value))
    }

    @Test func theErrorResponseMatchesTheProtocolDocument() {
        let response = Response(id: 2, status: Status(.notFound, "No city has the code \"XXX\"; ListCities lists the codes."))
        let expected: [UInt8] = [0x00, 0x00, 0x00, 0x3f, 0x08, 0x02, 0x12, 0x3b, 0x08, 0x05, 0x12, 0x37]
            + Array("No city has the code \"XXX\"; ListCities lists the codes.".utf8)
        #expect(response.encodedFrame() == expected)
    }

    /// Ids and message lengths on both sides of the varint size boundaries.
    @Test(arguments: [0, 1, 127, 128, 16_383, 16_384, UInt64(UInt32.max), UInt64.max],
          [0, 1, 117, 118, 127, 128, 300, 16_400])
    func appendStatusWritesADecodableFrame(id: UInt64, messageLength: Int) throws {
        let message = String(repeating: "x", count: messageLength)
        var out: [UInt8] = [0xAB, 0xCD]  // earlier bytes in the buffer stay untouched
        ResponseFrameWriter.appendStatus(id: id, status: Status(.notFound, message), to: &out)
        #expect(out.prefix(2) == [0xAB, 0xCD])
        let decoded = try Response.decode(try body(ofFrame: Array(out.dropFirst(2))))
        #expect(decoded == Response(id: id, status: Status(.notFound, message)))
    }

    @Test(arguments: [StatusCode.ok, .cancelled, .invalidArgument, .unimplemented, .unauthenticated,
                      StatusCode(rawValue: 42), StatusCode(rawValue: 1000)])
    func appendStatusCarriesEveryCode(code: StatusCode) throws {
        var out: [UInt8] = []
        ResponseFrameWriter.appendStatus(id: 3, status: Status(code, "m"), to: &out)
        let decoded = try Response.decode(try body(ofFrame: out))
        #expect(decoded.status.code == code)
        #expect(decoded.status.message == "m")
        #expect(decoded.id == 3)
        #expect(decoded.body == .none)
    }

    /// Bodies on both sides of the varint size boundaries of their length.
    @Test(arguments: [0, 1, 100, 118, 119, 120, 121, 200, 16_370, 16_380, 70_000])
    func appendOKWritesADecodableFrame(versionLength: Int) throws {
        let info = ServerInfo(serverVersion: String(repeating: "v", count: versionLength), protocolVersion: 1,
                              uptimeMilliseconds: 9, catalogVersion: 3, methods: ["ServerInfo"])
        let encodedBody = BodyEncoder.serverInfo(info)
        for id: UInt64 in [0, 1, 200, .max] {
            var out: [UInt8] = [1, 2, 3]
            ResponseFrameWriter.appendOK(id: id, field: .serverInfo, body: encodedBody, to: &out)
            #expect(out.prefix(3) == [1, 2, 3])
            let decoded = try Response.decode(try body(ofFrame: Array(out.dropFirst(3))))
            #expect(decoded == Response(id: id, body: .serverInfo(info)))
        }
    }

    @Test func appendOKPutsTheBodyUnderTheMethodsField() throws {
        let shelf = ShelfContents(shelf: fullShelf, storeUID: "store-msk-1", departmentUID: "dep-msk-1-01", catalogVersion: 2)
        let list = CityList(cities: [moscow], catalogVersion: 2)
        let catalog = StoreCatalog(store: store, city: moscow, catalogVersion: 2)
        var out: [UInt8] = []
        ResponseFrameWriter.appendOK(id: 1, field: .getShelf, body: BodyEncoder.getShelf(shelf), to: &out)
        ResponseFrameWriter.appendOK(id: 2, field: .listCities, body: BodyEncoder.listCities(list), to: &out)
        ResponseFrameWriter.appendOK(id: 3, field: .getStore, body: BodyEncoder.getStore(catalog), to: &out)
        var decoder = FrameDecoder()
        decoder.append(out)
        let responses = try decoder.drain().map { try Response.decode($0) }
        #expect(responses == [
            Response(id: 1, body: .getShelf(shelf)),
            Response(id: 2, body: .listCities(list)),
            Response(id: 3, body: .getStore(catalog)),
        ])
    }

    @Test func theV1MethodFieldsAndNames() {
        #expect(MethodField.serverInfo.rawValue == 10)
        #expect(MethodField.listCities.rawValue == 11)
        #expect(MethodField.getStore.rawValue == 12)
        #expect(MethodField.getShelf.rawValue == 13)
        #expect([MethodField.serverInfo, .listCities, .getStore, .getShelf].map(\.methodName)
                == ["ServerInfo", "ListCities", "GetStore", "GetShelf"])
    }

    /// A city record's stores are not part of the record (service.proto:
    /// "`stores` is ignored"): a record that carries some is read without them.
    @Test func aCityRecordIsReadWithoutItsStores() throws {
        var store = ProtoMessage("groser.v1.StoreSummary")
        store.fields[1] = [.string("store-x")]
        var city = ProtoMessage("groser.v1.City")
        city.fields[1] = [.string("city-x")]
        city.fields[4] = [.message(store)]
        var record = ProtoMessage("groser.v1.CatalogRecord")
        record.fields[1] = [.uint(2)]
        record.fields[2] = [.message(city)]
        var body = ProtoMessage("groser.v1.ImportCatalogRequest")
        body.fields[2] = [.message(record)]
        let bytes = ProtoMessage.request(id: 5, deadlineMilliseconds: 0, method: .importCatalog, body: body)
        guard case .importCatalog(let chunk) = try Request.decode(bytes).method else {
            Issue.record("not an import")
            return
        }
        #expect(chunk.records == [NumberedRecord(line: 2, record: .city(City(uid: "city-x", code: "", name: "", stores: [], defaultStoreUID: "")))])
    }
}
