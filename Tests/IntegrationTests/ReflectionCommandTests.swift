import Foundation
import GroserClient
import Testing

/// One `call` per method of the table: the -d JSON (SESSION and PRODUCT
/// replaced by a fresh session and an in-stock product of store-spb-1), the
/// exit code groser-client must end with (0, or 64 + the status groserd
/// refuses such a request with), and a key the printed JSON must have.
struct CallCase: Sendable, CustomTestStringConvertible {
    var method: String
    var data: String
    var exit: Int32
    var key: String
    var testDescription: String { "\(method) → \(exit)" }
}

let callCases: [CallCase] = [
    CallCase(method: "ServerInfo", data: "{}", exit: 0, key: "protocolVersion"),
    CallCase(method: "ListCities", data: "{}", exit: 0, key: "cities"),
    CallCase(method: "GetStore", data: #"{"city_code":"spb","knownStoreVersion":"0"}"#, exit: 0, key: "store"),
    CallCase(method: "GetShelf", data: #"{"shelfUid":"shf-nope"}"#, exit: 64 + 5, key: "code"),
    CallCase(method: "OpenSession", data: "{}", exit: 0, key: "session"),
    CallCase(method: "GetCart", data: #"{"session":"SESSION","storeUid":"store-spb-1"}"#, exit: 0, key: "cart"),
    CallCase(method: "AddItem", data: #"{"cart":{"session":"SESSION","storeUid":"store-spb-1"},"productUid":"PRODUCT","quantity":2}"#,
             exit: 0, key: "cart"),
    CallCase(method: "SetQuantity", data: #"{"cart":{"session":"SESSION","storeUid":"store-spb-1"},"productUid":"PRODUCT","quantity":3}"#,
             exit: 0, key: "cart"),
    // Not in the (new) cart.
    CallCase(method: "RemoveItem", data: #"{"cart":{"session":"SESSION","storeUid":"store-spb-1"},"productUid":"PRODUCT"}"#,
             exit: 64 + 5, key: "code"),
    CallCase(method: "ClearCart", data: #"{"cart":{"session":"SESSION","storeUid":"store-spb-1","idempotencyKey":"k"}}"#,
             exit: 0, key: "cart"),
    // No card: refused before anything is paid.
    CallCase(method: "Checkout", data: #"{"session":"SESSION","storeUid":"store-spb-1","expectedVersion":"1"}"#, exit: 64 + 3, key: "code"),
    CallCase(method: "ListOrders", data: #"{"session":"SESSION"}"#, exit: 0, key: ""),
    // The tests run as groserd's own user: an operator.
    CallCase(method: "SetProduct", data: #"{"productUid":"PRODUCT","stock":0}"#, exit: 0, key: "catalogVersion"),
    CallCase(method: "ListProducts", data: #"{"storeUid":"store-spb-1","pageSize":3}"#, exit: 0, key: "nextPageToken"),
    CallCase(method: "ImportCatalog", data: #"{"abort":true}"#, exit: 0, key: "importId"),
    CallCase(method: "ExportCatalog", data: #"{"storeUid":"store-spb-1","pageSize":2}"#, exit: 0, key: "records"),
    CallCase(method: "Register", data: #"{"email":"call@example.com","password":"call password","name":"Звонок"}"#, exit: 0, key: "account"),
    CallCase(method: "Login", data: #"{"email":"nobody@example.com","password":"not a password"}"#, exit: 64 + 16, key: "code"),
    CallCase(method: "Logout", data: #"{"session":"SESSION"}"#, exit: 64 + 9, key: "code"),
    CallCase(method: "WhoAmI", data: #"{"session":"SESSION"}"#, exit: 0, key: "sessionCreatedAtUnix"),
    CallCase(method: "Watch", data: #"{"storeUid":"store-spb-1"}"#, exit: 0, key: "initial"),
    CallCase(method: "CancelWatch", data: #"{"watchId":"5"}"#, exit: 64 + 5, key: "code"),
    CallCase(method: "Stats", data: "{}", exit: 0, key: "serverVersion"),
    CallCase(method: "SearchProducts", data: #"{"cityCode":"SPB","query":"молоко","pageSize":2}"#, exit: 0, key: "hits"),
    CallCase(method: "ListStores", data: #"{"cityCode":"SPB"}"#, exit: 0, key: "stores"),
    CallCase(method: "GetProducts", data: #"{"storeUid":"store-spb-1","productUids":["nope"]}"#, exit: 0, key: "missingUids"),
]

@Suite("groser-client list, describe and call, and --json's canonical mapping", .serialized)
struct ReflectionCommandTests {
    let daemon: Daemon
    let configHome: String
    init() throws {
        daemon = try Daemon()
        configHome = daemon.directory + "/config"
    }

    func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runClient(args, socket: daemon.socketPath, configHome: configHome)
    }

    func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text.prefix(500))")
    }

    @Test func listNamesEveryMethodOfTheTableWithItsMessages() throws {
        let r = try run(["list"])
        #expect(r.status == 0, "\(r.err)")
        let lines = r.out.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(lines.map { $0.first ?? "" } == MethodTable.all.map(\.name))
        let getStore = try #require(lines.first { $0.first == "GetStore" })
        #expect(getStore.dropFirst().prefix(2) == ["groser.v1.GetStoreRequest", "groser.v1.GetStoreResponse"])
        let addItem = try #require(lines.first { $0.first == "AddItem" })
        #expect(addItem.last == "groser.v1.CartResponse")
        #expect(lines.first { $0.first == "Watch" }?.last == "(stream)")
    }

    @Test func describeShowsAMessagesFieldsAndAMethodsMessages() throws {
        let message = try run(["describe", "GetStoreRequest"])
        #expect(message.status == 0, "\(message.err)")
        #expect(message.out.contains("groser.v1.GetStoreRequest is a message:"))
        #expect(message.out.contains("  oneof #1 {\n    string city_code = 1;  // JSON: cityCode\n"))
        #expect(message.out.contains("  uint64 known_store_version = 5;  // JSON: knownStoreVersion\n"))
        let city = try run(["describe", "groser.v1.City"])
        #expect(city.out.contains("  repeated groser.v1.StoreSummary stores = 4;\n"))
        let method = try run(["describe", "Watch"])
        #expect(method.out.contains("rpc Watch ( groser.v1.WatchRequest ) returns ( stream groser.v1.WatchEvent );"))
        #expect(method.out.contains("uint64 since_version = 4;"))
        let unknown = try run(["describe", "Bogus"])
        #expect(unknown.status == 2 && unknown.err.contains("Bogus"))
    }

    @Test("call answers every method of the table", arguments: callCases)
    func callEveryMethod(_ c: CallCase) throws {
        let client = daemon.client()
        let session = try client.openSession()
        let product = try #require(try client.productPage(ProductPageRequest(storeUID: "store-spb-1", pageSize: 50))
            .products.first { !$0.outOfStock })
        let data = c.data.replacingOccurrences(of: "SESSION", with: session).replacingOccurrences(of: "PRODUCT", with: product.uid)
        var args = ["call", c.method, "-d", data]
        if c.method == "Watch" { args += ["--count", "1"] }
        let r = try run(args)
        #expect(r.status == c.exit, "\(r.err)")
        let printed = try object(r.out)
        if !c.key.isEmpty { #expect(printed[c.key] != nil, "\(r.out.prefix(500))") }
        if c.exit != 0 {
            // The refusal is the Status message's JSON, its code named as the enum names it.
            let code = try #require(ProtoSchema.enumeration(named: "groser.v1.StatusCode")?.name(of: c.exit - 64))
            #expect(printed["code"] as? String == code)
            #expect((printed["message"] as? String)?.isEmpty == false)
            #expect(r.err.contains(code), "and one line on stderr")
        }
        #expect(Set(MethodTable.all.map(\.name)) == Set(callCases.map(\.method)), "a case for every method")
    }

    @Test func callReadsItsRequestFromAFileOrStandardInput() throws {
        let path = daemon.directory + "/request.json"
        try "{\"cityCode\": \"KZN\",\n \"includeProducts\": false}".write(toFile: path, atomically: true, encoding: .utf8)
        let fromFile = try run(["call", "GetStore", "-d", "@" + path])
        #expect(fromFile.status == 0, "\(fromFile.err)")
        #expect(((try object(fromFile.out)["city"]) as? [String: Any])?["code"] as? String == "KZN")
        let fromStdin = try runProgram(Daemon.groserClient, ["--socket", daemon.socketPath, "call", "GetShelf", "-d", "-"],
                                       environment: minimalEnvironment(), input: #"{"shelf_uid": "shf-nope"}"#)
        #expect(fromStdin.status == 69 && fromStdin.out.contains("\"NOT_FOUND\""), "\(fromStdin.err)")
    }

    @Test(arguments: [
        (#"{"cityCode":"SPB","citycode":"x"}"#, "citycode"),
        (#"{"cart":{"sesion":"x"}}"#, "sesion"),
    ])
    func anUnknownFieldIsAUsageErrorThatNamesIt(_ data: String, _ field: String) throws {
        let method = data.contains("cart") ? "ClearCart" : "GetStore"
        let r = try run(["call", method, "-d", data])
        #expect(r.status == 2)
        #expect(r.err.contains("unknown field \"\(field)\""), "\(r.err)")
        // call always answers in JSON, its usage errors too.
        #expect(r.out.contains("\"code\": \"INVALID_ARGUMENT\"") && r.out.contains(field), "\(r.out)")
    }

    @Test func aSyntaxErrorSaysWhereAndExits2() throws {
        let r = try run(["call", "GetStore", "-d", "{\"cityCode\": \"SPB\",\n  \"storeUid\" \"x\"}"])
        #expect(r.status == 2)
        #expect(r.err.contains("line 2, column 14"), "\(r.err)")
        #expect(try run(["call", "NoSuchMethod"]).status == 2)
    }

    @Test func jsonLeavesDefaultsOutUnlessAskedAndErrorsGoToStdout() throws {
        // Before: every default printed ("outOfStock": false on every product).
        let plain = try run(["get-store", "--city", "SPB", "--products", "--json"])
        #expect(plain.status == 0)
        #expect(!plain.out.contains("\"outOfStock\": false"))
        #expect(!plain.out.contains("\"notModified\""))
        let all = try run(["get-store", "--city", "SPB", "--products", "--json", "--emit-defaults"])
        #expect(all.out.contains("\"outOfStock\": false") && all.out.contains("\"notModified\": false"))
        #expect(try object(plain.out).count == object(all.out).count - 1,
                "the same fields but notModified at the top")

        let refused = try run(["get-store", "--city", "NOPE", "--json"])
        #expect(refused.status == 69)
        let error = try object(refused.out)
        #expect(error["code"] as? String == "NOT_FOUND")
        #expect((error["message"] as? String)?.contains("NOPE") == true)
        #expect(Set(error.keys) == ["code", "message"])

        let city = try run(["set-city", "spb", "--json"])
        #expect(city.status == 0)
        let printed = try object(city.out)
        #expect(printed["code"] as? String == "SPB" && printed["defaultStoreUid"] is String && printed["stores"] is [Any],
                "the City message, not an object of the CLI's own")
        #expect(printed["settingsPath"] == nil)
    }
}
