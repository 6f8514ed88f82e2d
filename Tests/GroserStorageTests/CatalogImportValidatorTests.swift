@testable import GroserStorage
import GroserWire
import Testing

/// CatalogImportValidator without a database: the rules both stores' imports
/// share, their exact messages and the order they are checked in, against a
/// lookup kept in dictionaries.
@Suite("catalog import validator")
struct CatalogImportValidatorTests {
    typealias Kind = CatalogImportValidator.Kind

    /// The file so far and the live catalog, as dictionaries.
    struct Fake: CatalogImportLookup {
        var file: [Kind: [String: UInt32]] = [:]
        /// Owners of the file's records: a store's city, the store of a
        /// department or shelf.
        var fileOwner: [Kind: [String: String]] = [:]
        var catalog: [Kind: [String: String]] = [:]
        var catalogCities: Set<String> = []
        var failure: String?

        struct Failed: Error, CustomStringConvertible { var description: String }

        func fail() throws(Failed) { if let failure { throw Failed(description: failure) } }
        func lineInFile(_ kind: Kind, _ uid: String) throws(Failed) -> UInt32? {
            try fail()
            return file[kind]?[uid]
        }
        func exists(_ kind: Kind, _ uid: String) throws(Failed) -> Bool {
            try fail()
            return file[kind]?[uid] != nil || (kind == .city ? catalogCities.contains(uid) : catalog[kind]?[uid] != nil)
        }
        func store(of kind: Kind, _ uid: String) throws(Failed) -> String? {
            try fail()
            return fileOwner[kind]?[uid] ?? catalog[kind]?[uid]
        }
        func ownerInCatalog(_ kind: Kind, _ uid: String) throws(Failed) -> String? {
            try fail()
            return catalog[kind]?[uid]
        }
    }

    static func city(_ uid: String) -> CatalogRecord {
        .city(City(uid: uid, code: "C", name: "City", stores: [], defaultStoreUID: "s"))
    }
    static func store(_ uid: String, city: String) -> CatalogRecord {
        .store(StoreSummary(uid: uid, name: "Store", chain: "Chain", address: "Street 1", cityUID: city))
    }
    static func department(_ uid: String, store: String) -> CatalogRecord {
        .department(CatalogDepartment(uid: uid, storeUID: store, name: "Dairy"))
    }
    static func shelf(_ uid: String, department: String) -> CatalogRecord {
        .shelf(CatalogShelf(uid: uid, departmentUID: department, name: "Milk"))
    }
    static func product(_ uid: String, shelf: String) -> CatalogRecord {
        .product(CatalogProduct(product: Product(uid: uid, name: "Milk", brand: "B", unit: "ml", unitSize: 1000,
                                                 price: Money(minorUnits: 100, currency: "EUR"), imageURL: "",
                                                 outOfStock: false, oftenOutOfStock: false, shelfUID: shelf), stock: 3))
    }

    /// The message `record` on line 7 is refused with, or nil when accepted.
    static func refusal(_ record: CatalogRecord, _ lookup: Fake) -> String? {
        do {
            _ = try CatalogImportValidator.check(NumberedRecord(line: 7, record: record), lookup)
            return nil
        } catch {
            #expect(error.line == 7)
            return error.reason
        }
    }

    @Test func aRecordWhoseParentsAreInTheFileOrTheCatalogIsAcceptedWithItsOwner() throws {
        var lookup = Fake()
        lookup.catalogCities = ["spb"]
        lookup.fileOwner[.department] = ["d1": "s1"]
        lookup.file[.store] = ["s1": 2]
        lookup.catalog[.shelf] = ["h1": "s1"]
        let check = { (r: CatalogRecord) throws(ImportProblem) in try CatalogImportValidator.check(NumberedRecord(line: 9, record: r), lookup) }
        #expect(try check(Self.city("msk")) == nil)
        #expect(try check(Self.store("s2", city: "spb")) == "spb")
        #expect(try check(Self.department("d2", store: "s1")) == "s1")
        #expect(try check(Self.shelf("h2", department: "d1")) == "s1")
        #expect(try check(Self.product("p1", shelf: "h1")) == "s1")
    }

    @Test(arguments: [
        (Kind.city, Self.city("x"), "city uid x is already on line 3"),
        (.store, Self.store("x", city: "c"), "store uid x is already on line 3"),
        (.department, Self.department("x", store: "s"), "department uid x is already on line 3"),
        (.shelf, Self.shelf("x", department: "d"), "shelf uid x is already on line 3"),
        (.product, Self.product("x", shelf: "h"), "product uid x is already on line 3"),
    ])
    func aUidTwiceInTheFileIsRefusedFirst(kind: Kind, record: CatalogRecord, message: String) {
        // No parent anywhere and a move too: the duplicate is what is said.
        var lookup = Fake()
        lookup.file[kind] = ["x": 3]
        lookup.catalog[kind] = ["x": "elsewhere"]
        #expect(Self.refusal(record, lookup) == message)
    }

    @Test(arguments: [
        (Self.store("s", city: "c"), "store s: city_uid c names no city in the file so far or the catalog; parents must come before their children"),
        (Self.department("d", store: "s2"), "department d: store_uid s2 names no store in the file so far or the catalog; parents must come before their children"),
        (Self.shelf("h", department: "d2"), "shelf h: department_uid d2 names no department in the file so far or the catalog; parents must come before their children"),
        (Self.product("p", shelf: "h2"), "product p: shelf_uid h2 names no shelf in the file so far or the catalog; parents must come before their children"),
    ])
    func aMissingParentIsRefusedBeforeAMove(record: CatalogRecord, message: String) {
        // The catalog has each record under another owner: the missing
        // parent is what is said.
        var lookup = Fake()
        lookup.catalog = [.store: ["s": "o"], .department: ["d": "o"], .shelf: ["h": "o"], .product: ["p": "o"]]
        #expect(Self.refusal(record, lookup) == message)
    }

    @Test(arguments: [
        (Self.store("s", city: "new"), "store s belongs to old; a store cannot move to another city"),
        (Self.department("d", store: "new"), "department d belongs to old; a department cannot move to another store"),
        (Self.shelf("h", department: "dn"), "shelf h belongs to store old; a shelf cannot move to another store"),
        (Self.product("p", shelf: "hn"), "product p is sold by store old; a product cannot move to another store"),
    ])
    func aRecordTheCatalogHasCannotMoveToAnotherOwner(record: CatalogRecord, message: String) {
        var lookup = Fake()
        lookup.catalogCities = ["new"]
        lookup.file[.store] = ["new": 1]
        lookup.fileOwner[.department] = ["dn": "new"]
        lookup.fileOwner[.shelf] = ["hn": "new"]
        lookup.catalog = [.store: ["s": "old"], .department: ["d": "old"], .shelf: ["h": "old"], .product: ["p": "old"]]
        #expect(Self.refusal(record, lookup) == message)
        // The same owner as the catalog's is no move.
        lookup.catalog = [.store: ["s": "new"], .department: ["d": "new"], .shelf: ["h": "new"], .product: ["p": "new"]]
        #expect(Self.refusal(record, lookup) == nil)
    }

    @Test func aLookupThatFailsRefusesTheRecordWithItsLine() {
        var lookup = Fake()
        lookup.failure = "SQLite: disk I/O error"
        #expect(Self.refusal(Self.city("c"), lookup) == "the import could not be staged: SQLite: disk I/O error")
    }
}
