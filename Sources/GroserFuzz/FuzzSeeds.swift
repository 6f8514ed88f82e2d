import GroserStorage
import GroserWire

/// The seed corpus: one valid framed request of every method, an empty
/// request, and a few pipelined conversations that reach the deep paths
/// (a successful checkout, idempotent replays, a price change). Generated
/// from the sample catalog, written by `groser-fuzz write-seeds DIR` into
/// `Tests/Fuzz/corpus`, and checked against that folder by the tests.
public enum FuzzSeeds {
    /// Seeds by file name.
    public static func all() -> [(name: String, bytes: [UInt8])] {
        let catalog = SampleCatalog.make()
        let spb = catalog.stores.first { $0.uid == "store-spb-1" } ?? catalog.stores[0]
        let products = spb.departments.flatMap(\.shelves).flatMap(\.products)
        let inStock = products.filter { !$0.outOfStock }
        let outOfStock = products.first { $0.outOfStock } ?? products[0]
        let elsewhere = catalog.stores.first { $0.uid != spb.uid }!.departments[0].shelves[0].products[0]
        let shelf = spb.departments[0].shelves[0]
        let store = spb.uid
        let session = FuzzHarness.session
        let a = inStock[0].uid, b = inStock[1].uid
        let card = PaymentCard(number: "4111 1111 1111 1111", expiryMonth: 12, expiryYear: 2030, cvc: "123",
                               holderName: "IVAN PETROV")
        func cart(_ key: String = "", version: UInt64 = 0) -> CartMutation {
            CartMutation(session: session, storeUID: store, idempotencyKey: key, expectedVersion: version)
        }
        func frames(_ requests: [Request]) -> [UInt8] {
            requests.flatMap { Framing.frame($0.encoded()) }
        }
        // Ids ≡ 0 (mod 3) run as root (see FuzzHarness.caller), so SetProduct is allowed.
        var seeds: [(String, [UInt8])] = [
            ("method-01-server-info", frames([Request(id: 1, method: .serverInfo)])),
            ("method-02-list-cities", frames([Request(id: 2, method: .listCities)])),
            ("method-03-get-store", frames([Request(id: 3, deadlineMilliseconds: 500,
                                                    method: .getStore(selector: .cityCode("spb"), includeProducts: true))])),
            ("method-04-get-shelf", frames([Request(id: 4, method: .getShelf(shelfUID: shelf.uid))])),
            ("method-05-open-session", frames([Request(id: 5, method: .openSession)])),
            ("method-06-get-cart", frames([Request(id: 6, method: .getCart(session: session, storeUID: store))])),
            ("method-07-add-item", frames([Request(id: 7, method: .addItem(cart("k7"), productUID: a, quantity: 2))])),
            ("method-08-set-quantity", frames([Request(id: 8, method: .setQuantity(cart(), productUID: a, quantity: 3))])),
            ("method-09-remove-item", frames([Request(id: 9, method: .removeItem(cart(), productUID: a))])),
            ("method-10-clear-cart", frames([Request(id: 10, method: .clearCart(cart(version: 0)))])),
            ("method-11-checkout", frames([Request(id: 11, method: .checkout(CheckoutDetails(
                session: session, storeUID: store, expectedVersion: 1, deliveryAddress: "Невский пр., 1",
                card: card, idempotencyKey: "pay-11")))])),
            ("method-12-list-orders", frames([Request(id: 12, method: .listOrders(session: session))])),
            ("method-13-set-product", frames([Request(id: 15, method: .setProduct(
                ProductUpdate(productUID: a, priceMinorUnits: 12_345, stock: 7)))])),
            ("method-14-empty-request", Framing.frame([UInt8]())),
            ("method-16-import-export", frames([
                Request(id: 21, method: .importCatalog(ImportChunk(importID: 0, records: [
                    NumberedRecord(line: 2, record: .department(CatalogDepartment(uid: "dep-fuzz", storeUID: store, name: "Fuzz"))),
                    NumberedRecord(line: 3, record: .shelf(CatalogShelf(uid: "shelf-fuzz", departmentUID: "dep-fuzz", name: "Fuzz"))),
                    NumberedRecord(line: 4, record: .product(CatalogProduct(product: Product(
                        uid: "prd-fuzz", name: "Fuzz", brand: "", unit: "g", unitSize: 1, price: Money(minorUnits: 100, currency: "RUB"),
                        imageURL: "/img/f.jpg", outOfStock: false, oftenOutOfStock: false, shelfUID: "shelf-fuzz"), stock: 3))),
                ], commit: true))),
                Request(id: 24, method: .exportCatalog(ExportPageRequest(storeUID: store, pageSize: 3))),
                Request(id: 27, method: .importCatalog(ImportChunk(importID: 99, abort: true))),
            ])),
            ("method-33-search-products", frames([
                Request(id: 31, method: .searchProducts(SearchRequest(selector: .storeUID(store), query: "молока 3,2", pageSize: 3))),
                Request(id: 32, method: .searchProducts(SearchRequest(selector: .cityCode("spb"), query: "vjkjrj", inStockOnly: true,
                                                                      groupByShelf: true))),
                Request(id: 33, method: .searchProducts(SearchRequest(selector: .storeUID(store), query: "малоко 1 л", shelfUID: shelf.uid))),
                Request(id: 34, method: .searchProducts(SearchRequest(selector: .storeUID(store), query: "сыр",
                                                                      pageToken: "p1.AAAAAAAAAAEAAAAHAAAAAAAAAAAAAAAAAAAAAA"))),
                Request(id: 35, method: .searchProducts(SearchRequest(selector: nil, query: " "))),
            ])),
            ("method-34-list-stores", frames([
                Request(id: 36, method: .listStores(city: .code("spb"))),
                Request(id: 37, method: .listStores(city: .uid("city-msk"))),
                Request(id: 38, method: .listStores(city: nil)),
                Request(id: 39, method: .listStores(city: .code("XXX"))),
            ])),
            ("method-35-get-products", frames([
                Request(id: 40, method: .getProducts(GetProductsRequest(storeUID: store, productUIDs: [a, b, a, "nope", elsewhere.uid]))),
                Request(id: 41, method: .getProducts(GetProductsRequest(storeUID: "store-nope", productUIDs: [a]))),
                Request(id: 42, method: .getProducts(GetProductsRequest(storeUID: store, productUIDs: []))),
            ])),
            ("method-15-list-products", frames([
                Request(id: 16, method: .listProducts(ProductPageRequest(storeUID: store, pageSize: 7))),
                Request(id: 17, method: .listProducts(ProductPageRequest(storeUID: store, shelfUID: shelf.uid, pageSize: 2))),
                Request(id: 18, method: .listProducts(ProductPageRequest(storeUID: store, pageToken: "p1.AAAAAAAAAAEAAAAHAAAAAAAAAAAAAAAAAAAAAA"))),
                Request(id: 19, method: .getStore(selector: .storeUID(store), includeProducts: false, knownStoreVersion: 1)),
                Request(id: 20, method: .getShelf(shelfUID: shelf.uid, knownStoreVersion: 1)),
            ])),
        ]
        seeds += [
            ("flow-checkout", frames([
                Request(id: 21, method: .addItem(cart("add-a"), productUID: a, quantity: 2)),
                Request(id: 22, method: .addItem(cart("add-b", version: 1), productUID: b, quantity: 1)),
                Request(id: 23, method: .getCart(session: session, storeUID: store)),
                Request(id: 24, method: .checkout(CheckoutDetails(
                    session: session, storeUID: store, expectedVersion: 2, deliveryAddress: "  Литейный пр., 10 ",
                    card: card, idempotencyKey: "pay-1"))),
                Request(id: 25, method: .checkout(CheckoutDetails(
                    session: session, storeUID: store, expectedVersion: 2, deliveryAddress: "  Литейный пр., 10 ",
                    card: card, idempotencyKey: "pay-1"))),
                Request(id: 26, method: .listOrders(session: session)),
            ])),
            ("flow-accounts", frames([
                Request(id: 61, method: .register(Registration(email: "Fuzz@Example.com", password: "fuzz password", name: "Fuzz"))),
                Request(id: 62, method: .register(Registration(email: "bad", password: "short", name: ""))),
                Request(id: 63, method: .addItem(cart("acc-a"), productUID: a, quantity: 2)),
                Request(id: 64, method: .login(LoginDetails(email: "fuzz@example.com", password: "wrong", guestSession: session))),
                Request(id: 65, method: .login(LoginDetails(email: "fuzz@example.com", password: "fuzz password",
                                                            guestSession: session, idempotencyKey: "login-65"))),
                Request(id: 66, method: .whoAmI(session: session)),
                Request(id: 67, method: .logout(session: session)),
                Request(id: 68, method: .logout(session: "")),
            ])),
            ("flow-watch", frames([
                Request(id: 71, method: .watch(selector: .cityCode("spb"), sinceVersion: 0)),
                Request(id: 72, method: .watch(selector: .storeUID(store), sinceVersion: 1)),
                Request(id: 73, method: .watch(selector: .cityUID(""), sinceVersion: 0)),
                Request(id: 71, method: .watch(selector: .cityCode("MSK"), sinceVersion: 0)),
                Request(id: 74, method: .cancelWatch(watchID: 72)),
                Request(id: 75, method: .cancelWatch(watchID: 72)),
                Request(id: 76, method: .stats),
            ])),
            ("flow-cart-rules", frames([
                Request(id: 31, method: .addItem(cart("x"), productUID: a, quantity: 98)),
                Request(id: 32, method: .addItem(cart("x"), productUID: a, quantity: 98)),
                Request(id: 34, method: .addItem(cart("y"), productUID: a, quantity: 2)),
                Request(id: 35, method: .addItem(cart("x"), productUID: b, quantity: 1)),
                Request(id: 37, method: .addItem(cart(), productUID: outOfStock.uid, quantity: 1)),
                Request(id: 38, method: .addItem(cart(), productUID: elsewhere.uid, quantity: 1)),
                Request(id: 40, method: .setQuantity(cart(version: 9), productUID: a, quantity: 5)),
                Request(id: 41, method: .setQuantity(cart(), productUID: b, quantity: 0)),
                Request(id: 43, method: .removeItem(cart(), productUID: b)),
                Request(id: 44, method: .clearCart(cart("clear"))),
                Request(id: 46, method: .getCart(session: "nope", storeUID: store)),
            ])),
            ("flow-price-change", frames([
                Request(id: 51, method: .addItem(cart(), productUID: a, quantity: 1)),
                Request(id: 54, method: .setProduct(ProductUpdate(productUID: a, priceMinorUnits: Int64.max / 2))),
                Request(id: 55, method: .addItem(cart(), productUID: b, quantity: 3)),
                Request(id: 56, method: .checkout(CheckoutDetails(
                    session: session, storeUID: store, expectedVersion: 2, deliveryAddress: "Садовая, 5", card: card))),
                Request(id: 58, method: .getCart(session: session, storeUID: store)),
                Request(id: 59, method: .checkout(CheckoutDetails(
                    session: session, storeUID: store, expectedVersion: 3, deliveryAddress: "Садовая, 5", card: card))),
                Request(id: 60, method: .setProduct(ProductUpdate(productUID: b, stock: 0))),
                Request(id: 61, method: .setProduct(ProductUpdate(productUID: b, priceMinorUnits: -1))),
            ])),
            ("flow-catalog-errors", frames([
                Request(id: 71, method: .getStore(selector: nil, includeProducts: false)),
                Request(id: 72, method: .getStore(selector: .cityCode("XXX"), includeProducts: false)),
                Request(id: 73, method: .getStore(selector: .cityUID("city-msk"), includeProducts: false)),
                Request(id: 74, method: .getStore(selector: .storeUID(store), includeProducts: false)),
                Request(id: 75, method: .getShelf(shelfUID: "")),
                Request(id: 76, method: .unknown),
            ]) + Framing.frame([0x08, 0x4d, 0xfa, 0x01, 0x00]) + Framing.frame([0xff, 0xff, 0xff])),
            // Three lines of the largest quantity: the cart's item count
            // passes UInt32.max (groserd trapped on it once).
            ("flow-count-overflow", frames([
                Request(id: 91, method: .addItem(cart(), productUID: a, quantity: FuzzHarness.maximumQuantity)),
                Request(id: 92, method: .addItem(cart(), productUID: b, quantity: FuzzHarness.maximumQuantity)),
                Request(id: 93, method: .addItem(cart(), productUID: inStock[2].uid, quantity: FuzzHarness.maximumQuantity)),
                Request(id: 94, method: .addItem(cart(), productUID: a, quantity: FuzzHarness.maximumQuantity)),
                Request(id: 95, method: .getCart(session: session, storeUID: store)),
            ])),
            ("frame-over-size", frames([Request(id: 81, method: .listCities)]) + [0xff, 0xff, 0xff, 0xff, 0x08, 0x01]),
        ]
        // A method none of the seeds above calls starts from its request
        // with every field zero (RequestMethod.zeroValued, generated from
        // the .protos), so a new method has a seed before it has a
        // hand-written one.
        let called = Set(seeds.flatMap { methods(in: $0.1) })
        for field in MethodField.allCases where !called.contains(field.methodName) {
            guard let method = RequestMethod.zeroValued(field) else { continue }
            seeds.append(("method-\(field.rawValue)-\(field.info.oneofField)-zero", frames([Request(id: UInt64(field.rawValue), method: method)])))
        }
        return seeds
    }

    /// The methods the seeds call, for checking that every method has one.
    public static func methods() -> Set<String> {
        Set(all().flatMap { methods(in: $0.bytes) })
    }

    /// The methods the requests framed in `bytes` call ("none" for a request without one).
    static func methods(in bytes: [UInt8]) -> [String] {
        var names: [String] = []
        var decoder = FrameDecoder(maximumFrameBytes: FuzzHarness.maximumFrameBytes)
        decoder.append(bytes)
        while let frame = try? decoder.next() {
            guard let request = try? Request.decode(frame) else { continue }
            names.append(methodName(request.method))
        }
        return names
    }

    static func methodName(_ method: RequestMethod) -> String { method.field?.methodName ?? "none" }

    /// Tests/Fuzz/groser.dict, the libFuzzer dictionary: every method's tag
    /// in `Request.method` (from the registry; with an empty body when the
    /// method's request has no fields), then the envelope's other fields,
    /// frame prefixes and the harness's uids and cards. Written by
    /// `groser-fuzz write-dict FILE`; a test compares it with the file.
    public static func dictionary() -> String {
        func quoted(_ bytes: [UInt8]) -> String {
            "\"" + bytes.map { "\\x" + String($0, radix: 16, uppercase: false).leftPadded(to: 2) }.joined() + "\""
        }
        let fields = MethodTable.all.map(\.field)
        var lines = [
            "# libFuzzer dictionary for groser-fuzz (tools/fuzz passes it with -dict).",
            "# Written by `groser-fuzz write-dict Tests/Fuzz/groser.dict` from the method registry; do not edit.",
            "# Request.method tags: fields \(fields.first!.rawValue)..\(fields.last!.rawValue), length-delimited"
                + " (with an empty body when the request has no fields).",
        ]
        for field in fields {
            var tag: [UInt8] = []
            ProtoWriter.appendTag(field: field.rawValue, wireType: ProtoWriter.wireLengthDelimited, to: &tag)
            if ProtoSchema.requestMessage(for: field).fields.isEmpty { tag.append(0) }
            lines.append(quoted(tag))
        }
        lines += [
            "# id and deadline_ms", quoted([0x08, 0x01]), quoted([0x10, 0xf4, 0x03]),
            "# frame length prefixes", quoted([0, 0, 0, 0]), quoted([0, 0, 0, 4]), quoted([0, 1, 0, 0]), quoted([0xff, 0xff, 0xff, 0xff]),
            "# the harness's known session, store, city, shelf and product uids",
        ]
        lines += [FuzzHarness.session, "store-spb-1", "store-msk-1", "city-spb", "SPB", "spb", "shf-spb-1-01-1",
                  "prd-spb-1-0001", "prd-spb-1-0002", "prd-ekb-1-0001"].map { "\"\($0)\"" }
        lines += ["# cards", "\"4111 1111 1111 1111\"", "\"2200000000000004\"", "\"123\""]
        return lines.joined(separator: "\n") + "\n"
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
