import GroserWire
import Testing

/// One canonical JSON request per method of the table: what
/// json_format.MessageToJson would write for it (defaults left out, fields
/// in number order, 64-bit integers as strings), with values that exercise
/// the mapping: the extremes of 64-bit and 32-bit integers, nested messages,
/// repeated fields, oneofs set to their default, and text with Cyrillic,
/// emoji, quotes and control characters.
let canonicalRequests: [String: String] = [
    "ServerInfo": #"{}"#,
    "ListCities": #"{}"#,
    "GetStore": #"{"cityCode":"SPB","includeProducts":true,"knownStoreVersion":"18446744073709551615"}"#,
    "GetShelf": #"{"shelfUid":"shf-молоко \"1\"\n\u001b[31m","knownStoreVersion":"42"}"#,
    "OpenSession": #"{}"#,
    "GetCart": #"{"session":"0123456789abcdef0123456789abcdef","storeUid":"store-spb-1"}"#,
    "AddItem": #"{"cart":{"session":"s","storeUid":"store-spb-1","idempotencyKey":"k1","expectedVersion":"7"},"productUid":"prd-1","quantity":3}"#,
    "SetQuantity": #"{"cart":{"session":"s","storeUid":"store-spb-1"},"productUid":"prd-1","quantity":4294967295}"#,
    "RemoveItem": #"{"cart":{"session":"s","expectedVersion":"1"},"productUid":"prd-1"}"#,
    "ClearCart": #"{"cart":{"session":"s"}}"#,
    "Checkout": #"{"session":"s","storeUid":"store-spb-1","expectedVersion":"3","deliveryAddress":"Невский проспект 1, кв. \"5\"\t🏠","card":{"number":"4111 1111 1111 1111","expiryMonth":12,"expiryYear":2029,"cvc":"123","holderName":"IVAN PETROV"},"idempotencyKey":"k2"}"#,
    "ListOrders": #"{"session":"s"}"#,
    "SetProduct": #"{"productUid":"prd-1","priceMinorUnits":"-9223372036854775808","stock":0}"#,
    "ListProducts": #"{"storeUid":"store-spb-1","shelfUid":"shf-1","pageSize":1000,"pageToken":"t"}"#,
    "ImportCatalog": #"{"importId":"5","records":[{"line":1,"city":{"uid":"city-spb","code":"SPB","name":"Санкт-Петербург 🏙","defaultStoreUid":"store-spb-1"}},{"line":2,"product":{"product":{"uid":"prd-1","name":"Молоко\u007f\u009b","unitSize":930,"price":{"minorUnits":"8990","currency":"RUB"},"outOfStock":true,"shelfUid":"shf-1"},"stock":3,"barcode":"4600000000001"}},{"store":{"uid":"store-spb-1","cityUid":"city-spb"}}],"replace":true}"#,
    "ExportCatalog": #"{"storeUid":"store-spb-1","pageSize":10000,"pageToken":"t"}"#,
    "Register": #"{"email":"ivan@example.com","password":"correct horse","name":"Иван"}"#,
    "Login": #"{"email":"ivan@example.com","password":"correct horse","session":"s","idempotencyKey":"k3"}"#,
    "Logout": #"{"session":"s"}"#,
    "WhoAmI": #"{"session":"s"}"#,
    "Watch": #"{"storeUid":"store-spb-1","sinceVersion":"12"}"#,
    "CancelWatch": #"{"watchId":"1"}"#,
    "Stats": #"{}"#,
    "SearchProducts": #"{"cityUid":"","query":"молоко 3,2","pageSize":20,"inStockOnly":true,"departmentUid":"dep-1","groupByShelf":true}"#,
    "ListStores": #"{"cityCode":"spb"}"#,
    "GetProducts": #"{"storeUid":"store-spb-1","productUids":["prd-1","prd-\"2\""]}"#,
]

@Suite("Protobuf's JSON mapping through the descriptors compiled in")
struct ProtoJSONTests {
    @Test func everyMethodOfTheTableHasARequestInTheTable() {
        #expect(Set(canonicalRequests.keys) == Set(MethodTable.all.map(\.name)))
    }

    @Test("JSON → message → protobuf-c → JSON gives the canonical text back", arguments: MethodTable.all.map(\.name))
    func roundTrip(_ method: String) throws {
        let info = try #require(MethodTable.named(method))
        let text = try #require(canonicalRequests[method])
        let type = ProtoSchema.requestMessage(for: info.field)
        let message = try ProtoJSON.message(from: JSON.parse(text), type: type.fullName)
        let bytes = message.encoded()
        let back = try ProtoMessage.decode(bytes, as: type.fullName)
        #expect(back == message)
        #expect(ProtoJSON.json(back).compact() == text)
    }

    @Test("the request envelope made from JSON is what groserd's own decoder reads", arguments: MethodTable.all.map(\.name))
    func envelopeReadsAsTheMethod(_ method: String) throws {
        let info = try #require(MethodTable.named(method))
        let body = try ProtoJSON.message(from: JSON.parse(canonicalRequests[method]!),
                                         type: ProtoSchema.requestMessage(for: info.field).fullName)
        let frame = ProtoMessage.request(id: 77, deadlineMilliseconds: 1500, method: info.field, body: body)
        let request = try Request.decode(frame)
        #expect(request.id == 77)
        #expect(request.deadlineMilliseconds == 1500)
        #expect(request.method.field == info.field)
    }

    @Test func valuesReachTheTypedDecoderExactly() throws {
        func method(_ name: String, _ json: String) throws -> RequestMethod {
            let info = MethodTable.named(name)!
            let body = try ProtoJSON.message(from: JSON.parse(json), type: ProtoSchema.requestMessage(for: info.field).fullName)
            return try Request.decode(ProtoMessage.request(id: 1, deadlineMilliseconds: 0, method: info.field, body: body)).method
        }
        #expect(try method("GetStore", canonicalRequests["GetStore"]!)
            == .getStore(selector: .cityCode("SPB"), includeProducts: true, knownStoreVersion: .max))
        // A oneof member set to its default is still set: stock 0 is "out of stock", not "unchanged".
        #expect(try method("SetProduct", canonicalRequests["SetProduct"]!)
            == .setProduct(ProductUpdate(productUID: "prd-1", priceMinorUnits: .min, stock: 0)))
        #expect(try method("SetProduct", #"{"productUid":"p","stock":5}"#)
            == .setProduct(ProductUpdate(productUID: "p", priceMinorUnits: nil, stock: 5)))
        #expect(try method("GetShelf", canonicalRequests["GetShelf"]!)
            == .getShelf(shelfUID: "shf-молоко \"1\"\n\u{1b}[31m", knownStoreVersion: 42))
    }

    @Test("the .proto names, numbers for 64-bit integers and exponents are read too")
    func lenientInputs() throws {
        let m = try ProtoJSON.message(from: JSON.parse(
            #"{"store_uid":"s","known_store_version":12,"include_products":false}"#), type: "groser.v1.GetStoreRequest")
        #expect(ProtoJSON.json(m).compact() == #"{"storeUid":"s","knownStoreVersion":"12"}"#)
        let p = try ProtoJSON.message(from: JSON.parse(#"{"pageSize":"1e3","pageToken":null}"#), type: "ListProductsRequest")
        #expect(ProtoJSON.json(p).compact() == #"{"pageSize":1000}"#)
    }

    @Test func enumsAreWrittenByNameAndReadByNameOrNumber() throws {
        let byName = try ProtoJSON.message(from: JSON.parse(#"{"code":"NOT_FOUND","message":"No city \"ZZZ\"."}"#), type: "groser.v1.Status")
        let byNumber = try ProtoJSON.message(from: JSON.parse(#"{"code":5,"message":"No city \"ZZZ\"."}"#), type: "groser.v1.Status")
        #expect(byName == byNumber)
        #expect(ProtoJSON.json(try ProtoMessage.decode(byName.encoded(), as: "groser.v1.Status")).compact()
            == #"{"code":"NOT_FOUND","message":"No city \"ZZZ\"."}"#)
        #expect(ProtoJSON.json(Status(.unauthenticated, "who?")).compact() == #"{"code":"UNAUTHENTICATED","message":"who?"}"#)
        // A number the enum does not declare stays a number.
        #expect(ProtoJSON.json(Status(StatusCode(rawValue: 42))).compact() == #"{"code":42}"#)
        #expect(throws: ProtoJSONError.self) { try ProtoJSON.message(from: JSON.parse(#"{"code":"NOPE"}"#), type: "groser.v1.Status") }
    }

    @Test func defaultsAreLeftOutUnlessAskedFor() throws {
        let empty = ProtoMessage("groser.v1.GetStoreRequest")
        #expect(ProtoJSON.json(empty).compact() == "{}")
        // Oneof members and messages have presence: never printed unset.
        #expect(ProtoJSON.json(empty, emitDefaults: true).compact() == #"{"includeProducts":false,"knownStoreVersion":"0"}"#)
        #expect(ProtoJSON.json(ProtoMessage("groser.v1.Status"), emitDefaults: true).compact() == #"{"code":"OK","message":""}"#)
        #expect(ProtoJSON.json(ProtoMessage("groser.v1.City"), emitDefaults: true).compact()
            == #"{"uid":"","code":"","name":"","stores":[],"defaultStoreUid":""}"#)
        // Zeroes given in the JSON are not kept for fields without presence.
        let zeroes = try ProtoJSON.message(from: JSON.parse(#"{"pageSize":0,"storeUid":"","shelfUid":"x"}"#), type: "ListProductsRequest")
        #expect(zeroes.fields.keys.sorted() == [2])
    }

    @Test func aServerAnswerReadsThroughTheDescriptors() throws {
        let cart = Cart(storeUID: "store-spb-1", lines: [
            CartLine(productUID: "p1", name: "Молоко", unitPrice: Money(minorUnits: 8990, currency: "RUB"), quantity: 2,
                     lineTotal: Money(minorUnits: 17980, currency: "RUB"), priceChanged: true,
                     previousPrice: Money(minorUnits: 7990, currency: "RUB"), outOfStock: false),
        ], subtotal: Money(minorUnits: 17980, currency: "RUB"), itemCount: 2, currency: "RUB", version: 9)
        let frame = Response(id: 3, body: .cart(cart)).encodedFrame()
        let answer = try ProtoAnswer(Array(frame.dropFirst(4)))
        #expect(answer.id == 3 && answer.status.isOK && answer.method == .getCart)
        let json = ProtoJSON.json(try #require(answer.body)).compact()
        #expect(json == #"{"cart":{"storeUid":"store-spb-1","lines":[{"productUid":"p1","name":"Молоко","unitPrice":{"minorUnits":"8990","currency":"RUB"},"quantity":2,"lineTotal":{"minorUnits":"17980","currency":"RUB"},"priceChanged":true,"previousPrice":{"minorUnits":"7990","currency":"RUB"}}],"subtotal":{"minorUnits":"17980","currency":"RUB"},"itemCount":2,"currency":"RUB","version":"9"}}"#)
        let refused = Response(id: 4, status: Status(.notFound, "no such shelf")).encodedFrame()
        let error = try ProtoAnswer(Array(refused.dropFirst(4)))
        #expect(error.status == Status(.notFound, "no such shelf") && error.body == nil)
    }

    @Test("bytes are base64, standard or URL-safe, padded or not")
    func base64() throws {
        // No message of the protocol has a bytes field; the unknown-field
        // path and the codec are what can be checked here.
        for (text, ok) in [("", true), ("Zg", true), ("Zg==", true), ("Zm8=", true), ("-_8", true), ("Z", false), ("Zg=x", false), ("Z!", false)] {
            #expect((Base64.decode(text) != nil) == ok, "\(text)")
        }
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
        #expect(Base64.decode("-_8") == [0xFB, 0xFF])
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
    }

    @Test(arguments: [
        (#"{"cityCode":"SPB","bogus":1}"#, "bogus", "unknown field \"bogus\""),
        (#"{"cityCode":"SPB","storeUid":"x"}"#, nil, "same oneof"),
        (#"{"known_store_version":"1","knownStoreVersion":"2"}"#, nil, "given twice"),
        (#"{"knownStoreVersion":"-1"}"#, nil, "non-negative integer"),
        (#"{"knownStoreVersion":1.5}"#, nil, "non-negative integer"),
        (#"{"includeProducts":"yes"}"#, nil, "true or false"),
        (#"{"cityCode":5}"#, nil, "a string"),
        (#"[]"#, nil, "expected a JSON object"),
    ] as [(String, String?, String)])
    func refusedRequests(_ text: String, _ unknown: String?, _ reason: String) throws {
        let json = try JSON.parse(text)
        do throws(ProtoJSONError) {
            _ = try ProtoJSON.message(from: json, type: "groser.v1.GetStoreRequest")
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.unknownField == unknown)
            #expect(error.description.contains(reason), "\(error)")
        }
        let nested = #"{"cart":{"session":"s","sesion":"t"}}"#
        #expect(throws: ProtoJSONError("unknown field \"sesion\" in groser.v1.CartMutation", path: "cart.sesion", unknownField: "sesion")) {
            try ProtoJSON.message(from: JSON.parse(nested), type: "groser.v1.ClearCartRequest")
        }
        #expect(throws: ProtoJSONError.self) {
            try ProtoJSON.message(from: JSON.parse(#"{"quantity":4294967296}"#), type: "groser.v1.AddItemRequest")
        }
    }

    @Test(arguments: [
        ("{\"a\":1,\n \"a\":2}", 2, 2, "given twice"),
        ("{\"a\":1,}", 1, 8, "expected a string key"),
        ("{\"a\":01}", 1, 6, "cannot start with 0"),
        ("{\"молоко\": tru}", 1, 12, "unexpected character"),
        ("{\"a\":\"x\ny\"}", 1, 8, "control character"),
        ("{\"a\":\"\\ud800\"}", 1, 7, "lone surrogate"),
        ("{} {}", 1, 4, "after the JSON value"),
        ("", 1, 1, "ends"),
    ])
    func syntaxErrorsSayWhere(_ text: String, _ line: Int, _ column: Int, _ reason: String) {
        do throws(JSONSyntaxError) {
            _ = try JSON.parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.line == line && error.column == column, "\(error)")
            #expect(error.reason.contains(reason), "\(error)")
        }
    }

    @Test func escapesReadBackAndControlsAreWrittenEscaped() throws {
        let parsed = try JSON.parse(#"["\u00e9\ud83e\udd5b\/\b\f\n\r\t\"\\"]"#)
        #expect(parsed == .array([.string("é🥛/\u{8}\u{c}\n\r\t\"\\")]))
        #expect(parsed.compact() == #"["é🥛/\u0008\u000c\n\r\t\"\\"]"#)
    }

    @Test func listAndDescribeComeFromTheDescriptors() throws {
        #expect(ProtoSchema.requestMessage(for: .getStore).fullName == "groser.v1.GetStoreRequest")
        #expect(ProtoSchema.responseMessage(for: .addItem).fullName == "groser.v1.CartResponse")
        #expect(ProtoSchema.responseMessage(for: .watch).fullName == "groser.v1.WatchEvent")
        let getStore = try #require(ProtoSchema.message(named: "GetStoreRequest"))
        #expect(getStore.fields.map(\.name) == ["city_code", "city_uid", "store_uid", "include_products", "known_store_version"])
        #expect(getStore.fields.map(\.oneofIndex) == [0, 0, 0, nil, nil])
        #expect(getStore.field(named: "knownStoreVersion")?.type == .uint64)
        let setProduct = try #require(ProtoSchema.message(named: "groser.v1.SetProductRequest"))
        #expect(setProduct.fields.map(\.oneofIndex) == [nil, 0, 1], "two one-field oneofs are two oneofs")
        let city = try #require(ProtoSchema.message(named: "City"))
        #expect(city.field(named: "stores")?.isRepeated == true && city.field(named: "stores")?.type == .message("groser.v1.StoreSummary"))
        #expect(ProtoSchema.enumeration(named: "groser.v1.StatusCode")?.name(of: 16) == "UNAUTHENTICATED")
        #expect(ProtoSchema.messages.count > 60)
    }
}
