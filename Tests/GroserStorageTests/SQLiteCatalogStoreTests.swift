import GroserStorage
import GroserWire
import Testing

private func allShelves(_ catalog: Catalog) -> [Shelf] {
    catalog.stores.flatMap { $0.departments.flatMap(\.shelves) }
}

private func allProducts(_ catalog: Catalog) -> [Product] {
    allShelves(catalog).flatMap(\.products)
}

/// Row counts per table, as the catalog implies them.
private func expectedRowCounts(_ catalog: Catalog) -> [String] {
    [
        catalog.cities.count,
        catalog.stores.count,
        catalog.stores.reduce(0) { $0 + $1.departments.count },
        allShelves(catalog).count,
        allProducts(catalog).count,
    ].map(String.init)
}

private let rowCountSQL = """
    SELECT count(*) FROM cities; SELECT count(*) FROM stores; SELECT count(*) FROM departments;
    SELECT count(*) FROM shelves; SELECT count(*) FROM products;
    """

@Suite("SQLiteCatalogStore")
struct SQLiteCatalogStoreTests {
    @Test func openingAnEmptyDirectoryCreatesTheDatabaseWithTheSampleCatalog() throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteCatalogStore(directory: dir.path)
        #expect(store.path == dir.path + "/groser.sqlite3")
        #expect(fileExists(dir.file("groser.sqlite3")))

        let (catalog, version) = try store.loadCatalog()
        #expect(version == 1)
        #expect(try store.catalogVersion() == 1)

        // Cities: at least five, MSK and SPB among them, ordered by code.
        let codes = catalog.cities.map(\.code)
        #expect(catalog.cities.count >= 5)
        #expect(codes.contains("MSK"))
        #expect(codes.contains("SPB"))
        #expect(codes == codes.sorted())
        #expect(Set(codes).count == codes.count)
        for code in codes { #expect(code == code.uppercased() && !code.isEmpty) }

        // Every city's stores belong to it and its default store is one of them;
        // every store is listed by exactly one city.
        let storeUIDs = catalog.stores.map(\.uid)
        #expect(Set(storeUIDs).count == storeUIDs.count)
        var listed: [String] = []
        for city in catalog.cities {
            #expect(!city.stores.isEmpty, "\(city.code) has no stores")
            #expect(city.stores.map(\.uid).contains(city.defaultStoreUID), "\(city.code)'s default store is not among its stores")
            for s in city.stores { #expect(s.cityUID == city.uid) }
            listed += city.stores.map(\.uid)
        }
        #expect(listed.sorted() == storeUIDs.sorted())
        let summaries = Dictionary(uniqueKeysWithValues: catalog.cities.flatMap(\.stores).map { ($0.uid, $0) })
        for s in catalog.stores { #expect(summaries[s.uid] == s.summary) }

        // Each store: ten departments, forty shelves, at least 500 products.
        for s in catalog.stores {
            let shelves = s.departments.flatMap(\.shelves)
            let products = shelves.flatMap(\.products)
            #expect(s.departments.count == 10, "\(s.uid)")
            #expect(shelves.count == 40, "\(s.uid)")
            #expect(products.count >= 500, "\(s.uid)")
            for shelf in shelves {
                #expect(Int(shelf.productCount) == shelf.products.count, "\(shelf.uid)")
                #expect(!shelf.products.isEmpty, "\(shelf.uid)")
            }
        }

        // Products: RUB prices above zero, relative image URLs, unique uids,
        // each on its shelf, sorted by name.
        let products = allProducts(catalog)
        #expect(Set(products.map(\.uid)).count == products.count)
        for shelf in allShelves(catalog) {
            for p in shelf.products {
                #expect(p.price.currency == "RUB", "\(p.uid)")
                #expect(p.price.minorUnits > 0, "\(p.uid)")
                #expect(p.imageURL.hasPrefix("/") && !p.imageURL.contains("://"), "\(p.uid): \(p.imageURL)")
                #expect(p.shelfUID == shelf.uid)
                #expect(["g", "ml", "pcs"].contains(p.unit), "\(p.uid)")
                #expect(p.unitSize > 0, "\(p.uid)")
                #expect(!p.name.isEmpty)
            }
            for (a, b) in zip(shelf.products, shelf.products.dropFirst()) {
                #expect(a.name.precedesByCodePoint(b.name), "\(shelf.uid): \(a.name) before \(b.name)")
            }
        }
    }

    @Test func theLoadedCatalogEqualsTheSampleCatalog() throws {
        let dir = try TemporaryDirectory()
        let (catalog, _) = try SQLiteCatalogStore(directory: dir.path).loadCatalog()
        let sample = SampleCatalog.make()
        #expect(catalog.cities == sample.cities)
        #expect(catalog.stores.map(\.uid) == sample.stores.map(\.uid))
        for (loaded, made) in zip(catalog.stores, sample.stores) {
            let same = loaded == made  // compared first: a failure prints names, not two whole stores
            #expect(same, "store \(made.uid) differs from the sample catalog's")
        }
        #expect(catalog == sample)
    }

    @Test func theSampleCatalogIsTheSameOnEveryCall() {
        #expect(SampleCatalog.make() == SampleCatalog.make())
    }

    @Test func reopeningTheSameFileDoesNotDuplicateRows() throws {
        let dir = try TemporaryDirectory()
        let first = try SQLiteCatalogStore(directory: dir.path).loadCatalog()
        let second = try SQLiteCatalogStore(directory: dir.path).loadCatalog()
        let third = try SQLiteCatalogStore(path: dir.file("groser.sqlite3")).loadCatalog()
        #expect(second.version == first.version)
        #expect(second.catalog == first.catalog)
        #expect(third.catalog == first.catalog)
        #expect(allProducts(second.catalog).count == allProducts(first.catalog).count)
        if sqlite3Shell != nil {
            #expect(try sqlite3(dir.file("groser.sqlite3"), rowCountSQL) == expectedRowCounts(first.catalog))
        }
    }

    @Test func withoutSeedingTheCatalogIsEmpty() throws {
        let dir = try TemporaryDirectory()
        do {
            let store = try SQLiteCatalogStore(directory: dir.path, seedSampleCatalog: false)
            let (catalog, version) = try store.loadCatalog()
            #expect(catalog.cities.isEmpty)
            #expect(catalog.stores.isEmpty)
            #expect(version == 1)
            #expect(fileExists(dir.file("groser.sqlite3")))
        }
        // The database is still empty, so a later seeding open fills it.
        let (catalog, _) = try SQLiteCatalogStore(directory: dir.path).loadCatalog()
        #expect(catalog == SampleCatalog.make())
    }

    @Test func aFileThatIsNotADatabaseIsAStorageError() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("groser.sqlite3")
        try writeFile(path, Array(String(repeating: "this is not a database\n", count: 200).utf8))
        let error = #expect(throws: StorageError.self) {
            _ = try SQLiteCatalogStore(path: path)
        }
        #expect(error?.description.contains("not a database") == true, "\(String(describing: error))")
    }

    @Test func aMissingDirectoryIsAStorageError() throws {
        let dir = try TemporaryDirectory()
        #expect(throws: StorageError.self) {
            _ = try SQLiteCatalogStore(directory: dir.file("no/such/dir"))
        }
        #expect(!fileExists(dir.file("no")))
    }

    @Test(.enabled(if: sqlite3Shell != nil, "needs the sqlite3 shell"))
    func aDatabaseFromANewerVersionIsRefused() throws {
        let dir = try TemporaryDirectory()
        _ = try SQLiteCatalogStore(directory: dir.path)
        _ = try sqlite3(dir.file("groser.sqlite3"), "PRAGMA user_version = 999;")
        let error = #expect(throws: StorageError.self) {
            _ = try SQLiteCatalogStore(directory: dir.path)
        }
        #expect(error?.description.contains("newer") == true, "\(String(describing: error))")
    }

    /// Rows added to the file after seeding (out of name order, as an
    /// operator's import would) still come back sorted, counted and with
    /// their stock read right.
    @Test(.enabled(if: sqlite3Shell != nil, "needs the sqlite3 shell"))
    func productsAddedLaterAreLoadedSortedByName() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("groser.sqlite3")
        let shelfUID = "shf-msk-1-01-1"
        let before = try SQLiteCatalogStore(path: path).loadCatalog().catalog
        let original = try #require(allShelves(before).first { $0.uid == shelfUID })
        _ = try sqlite3(path, """
            INSERT INTO products(uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency,
                                 image_url, stock, often_out_of_stock)
            VALUES ('prd-late-z', '\(shelfUID)', 'Яяя поздний', 'Бренд', 'g', 100, 12990, 'RUB',
                    '/img/products/prd-late-z.jpg', 0, 1),
                   ('prd-late-a', '\(shelfUID)', 'Ааа поздний', '', 'pcs', 1, 990, 'RUB',
                    '/img/products/prd-late-a.jpg', 3, 0);
            """)
        let after = try SQLiteCatalogStore(path: path).loadCatalog().catalog
        let shelf = try #require(allShelves(after).first { $0.uid == shelfUID })
        #expect(shelf.products.count == original.products.count + 2)
        #expect(Int(shelf.productCount) == shelf.products.count)
        #expect(shelf.products.first?.uid == "prd-late-a")
        #expect(shelf.products.last?.uid == "prd-late-z")
        let names = shelf.products.map(\.name)
        for (a, b) in zip(names, names.dropFirst()) { #expect(a.precedesByCodePoint(b), "\(a) before \(b)") }
        let late = try #require(shelf.products.last)
        #expect(late == Product(uid: "prd-late-z", name: "Яяя поздний", brand: "Бренд", unit: "g", unitSize: 100,
                                price: Money(minorUnits: 12990, currency: "RUB"),
                                imageURL: "/img/products/prd-late-z.jpg", outOfStock: true, oftenOutOfStock: true,
                                shelfUID: shelfUID))
        #expect(shelf.products.first?.outOfStock == false)
        #expect(shelf.products.first?.oftenOutOfStock == false)
    }

    @Test func theDatabaseIsInWALMode() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("groser.sqlite3")
        let store = try SQLiteCatalogStore(path: path)
        _ = try store.loadCatalog()
        // In WAL mode writes go to the -wal file, which exists while a connection is open.
        #expect(fileExists(path + "-wal"))
        if sqlite3Shell != nil {
            #expect(try sqlite3(path, "PRAGMA journal_mode;") == ["wal"])
        }
        withExtendedLifetime(store) {}
    }

    @Test func concurrentLoadsSeeTheSameCatalog() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteCatalogStore(directory: dir.path)
        let expected = try store.loadCatalog().catalog
        let results = try await withThrowingTaskGroup(of: Catalog.self) { group in
            for _ in 0..<4 {
                group.addTask { try store.loadCatalog().catalog }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 4)
        for catalog in results { #expect(catalog == expected) }
    }
}
