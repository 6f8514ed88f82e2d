import GroserSearch
import GroserStorage
import GroserWire
import Testing

@Suite("tokens")
struct TokenizerTests {
    @Test func wordsAreFoldedAndYoIsYe() {
        #expect(Tokenizer.tokens("Село Зелёное ЁЖИК").map(\.text) == ["село", "зеленое", "ежик"])
    }

    @Test func aDecimalCommaStaysInTheNumberAndPercentSeparates() {
        let t = Tokenizer.tokens("Молоко 3,2% отборное 3,4-6%")
        #expect(t.map(\.text) == ["молоко", "3.2", "отборное", "3.4", "6"])
        #expect(t[1].kind == .number)
    }

    @Test func aNumberAndAUnitMakeAQuantity() {
        #expect(Tokenizer.tokens("1 л", keepParts: false).map(\.text) == ["1л"])
        #expect(Tokenizer.tokens("900г", keepParts: false).map(\.text) == ["900г"])
        #expect(Tokenizer.tokens("0,50 L", keepParts: false).map(\.text) == ["0.5л"])
        #expect(Tokenizer.tokens("Вода 1,5 л").map(\.text) == ["вода", "1.5", "1.5л", "л"])
    }

    @Test func offsetsAreUTF8BytesOfTheOriginal() {
        let name = "Кефир Весёлый 3,2%"
        let t = Tokenizer.tokens(name)
        let bytes = Array(name.utf8)
        #expect(t.map { String(decoding: bytes[$0.start..<$0.end], as: UTF8.self) } == ["Кефир", "Весёлый", "3,2"])
    }

    @Test func theOtherKeyboardLayout() {
        #expect(KeyboardLayout.switched("vjkjrj") == "молоко")
        #expect(KeyboardLayout.switched("gtkmvtyb") == "пельмени")
        #expect(KeyboardLayout.switched("vjkjrj 3,2") == "молоко 3,2")
        #expect(KeyboardLayout.switched("ыуфкср") == "search")
        #expect(KeyboardLayout.switched("123") == nil)
    }
}

@Suite("stems and typos")
struct StemAndTypoTests {
    @Test func snowballStemsRussianAndEnglish() {
        let s = Stemmer()
        #expect(s.stem("молока", script: .cyrillic) == s.stem("молоко", script: .cyrillic))
        #expect(s.stem("пельмени", script: .cyrillic) == s.stem("пельменей", script: .cyrillic))
        #expect(s.stem("apples", script: .latin) == s.stem("apple", script: .latin))
        #expect(s.stem("42", script: .other) == "42")
    }
}

/// The sample catalog's SPB default store, indexed.
private let spb: (store: Store, index: SearchIndex, products: [Product]) = {
    let catalog = SampleCatalog.make()
    let store = catalog.stores.first { $0.uid == "store-spb-1" }!
    var shelves: [SearchShelf] = []
    var products: [Product] = []
    for d in store.departments {
        for s in d.shelves {
            shelves.append(SearchShelf(uid: s.uid, name: s.name, departmentName: d.name, products: s.products))
            products += s.products
        }
    }
    return (store, SearchIndex(shelves: shelves, stemmer: Stemmer()), products)
}()

private func search(_ q: String, filter: SearchFilter = SearchFilter(), limit: Int = 10) -> (names: [String], outcome: SearchOutcome) {
    let outcome = spb.index.search(q, filter: filter, limit: limit, stemmer: Stemmer()) { spb.products[Int($0)].outOfStock }
    return (outcome.hits.map { spb.products[Int($0.product)].name }, outcome)
}

@Suite("search over the sample store")
struct SearchIndexTests {
    @Test func everyProductIsIndexedInStoreOrder() {
        #expect(spb.index.productCount == spb.products.count)
        #expect(spb.index.productCount > 500)
    }

    @Test func stemmingFindsMilkForMolokaAndNumbersNarrow() {
        let (names, outcome) = search("молока 3,2")
        #expect(!names.isEmpty)
        #expect(names.prefix(3).allSatisfy { $0.hasPrefix("Молоко") && $0.contains("3,2%") }, "\(names)")
        #expect(outcome.hits.first?.matchedWords == 2)
    }

    @Test func theLastWordIsAPrefixUnlessASpaceFollows() {
        let (names, _) = search("пельм")
        #expect(names.first?.hasPrefix("Пельмени") == true, "\(names)")
        let (spaced, _) = search("пельм ")
        #expect(spaced.isEmpty, "\(spaced)")
    }

    @Test func oneTypoInAFiveLetterWordAndTwoInANineLetterOne() {
        #expect(search("малоко").names.first?.hasPrefix("Молоко") == true)
        #expect(search("кифир").names.first?.hasPrefix("Кефир") == true)
        // "простоквашино" (13 letters) with two typos.
        let (names, _) = search("прастаквашино")
        #expect(names.first?.contains("Простоквашино") == true, "\(names)")
        // Four letters allow none.
        #expect(search("сырр").names.allSatisfy { !$0.hasPrefix("Сыр ") } || search("сырр").names.isEmpty)
    }

    @Test func theWrongKeyboardLayoutIsRetyped() {
        let (names, outcome) = search("vjkjrj")
        #expect(outcome.layoutSwitched)
        #expect(outcome.queryUsed == "молоко")
        #expect(names.first?.hasPrefix("Молоко") == true, "\(names)")
        // A Latin brand typed right is not switched.
        let (epica, o2) = search("epica")
        #expect(!o2.layoutSwitched)
        #expect(epica.first?.contains("Epica") == true, "\(epica)")
    }

    @Test func yoAndYeAreTheSameLetter() {
        #expect(search("зеленое").names.first?.contains("Зелёное") == true)
        #expect(search("весёлый").names.first?.contains("Весёлый") == true)
    }

    @Test func unitsMatchThePackSize() {
        let (names, _) = search("кефир 900 мл")
        #expect(names.first?.hasPrefix("Кефир") == true)
        let (grams, outcome) = search("сыр 200 г")
        #expect(outcome.hits.first?.matchedWords == 2)
        #expect(grams.first?.hasPrefix("Сыр") == true, "\(grams)")
        let p = spb.products[Int(outcome.hits[0].product)]
        #expect(p.unit == "g" && p.unitSize == 200)
    }

    @Test func moreWordsMatchedRankFirst() {
        let (names, outcome) = search("сыр гауда")
        #expect(names.first?.contains("Гауда") == true, "\(names)")
        #expect(outcome.hits.first?.matchedWords == 2)
        // Every two-word hit comes before every one-word hit.
        let counts = outcome.hits.map(\.matchedWords)
        #expect(counts == counts.sorted(by: >))
    }

    @Test func exactBeatsStemmedBeatsPrefixBeatsTypo() {
        let shelves = [SearchShelf(name: "Полка", departmentName: "Отдел", products: [
            product("a", "Творожок сладкий"),   // typo of "творог"? no: prefix "твор"
            product("b", "Творога пачка"),      // stemmed
            product("c", "Творог зерненый"),    // exact
        ])]
        let index = SearchIndex(shelves: shelves, stemmer: Stemmer())
        let names = index.search("творог", limit: 10, stemmer: Stemmer()) { _ in false }.hits.map { shelves[0].products[Int($0.product)].name }
        #expect(names.first == "Творог зерненый")
        #expect(names.dropFirst().first == "Творога пачка", "\(names)")
    }

    @Test func nameBeatsBrandBeatsShelfAndInStockBeatsOut() {
        let shelves = [
            SearchShelf(name: "Соки", departmentName: "Напитки", products: [
                product("a", "Сок яблочный", brand: "Добрый"),
                product("b", "Нектар вишнёвый", brand: "Сок и Ко"),
                product("c", "Морс клюквенный", brand: "Ягода"),
            ]),
            SearchShelf(name: "Прочее", departmentName: "Разное", products: [
                product("d", "Сок яблочный", brand: "Добрый", out: true),
                product("e", "Сок яблочный", brand: "Добрый"),
            ]),
        ]
        let all = shelves.flatMap(\.products)
        let index = SearchIndex(shelves: shelves, stemmer: Stemmer())
        let uids = index.search("сок", limit: 10, stemmer: Stemmer()) { all[Int($0)].outOfStock }.hits.map { all[Int($0.product)].uid }
        // Names first (in stock, in store order), then the out-of-stock
        // name, then the brand, then the shelf name.
        #expect(uids == ["a", "e", "d", "b", "c"])
        let inStock = index.search("сок", filter: SearchFilter(inStockOnly: true), limit: 10, stemmer: Stemmer()) { all[Int($0)].outOfStock }
        #expect(!inStock.hits.map { all[Int($0.product)].uid }.contains("d"))
        #expect(inStock.total == 4)
    }

    @Test func highlightsMarkTheMatchedWordsInTheName() {
        let (_, outcome) = search("молоко 3,2")
        let p = spb.products[Int(outcome.hits[0].product)]
        let bytes = Array(p.name.utf8)
        let marked = spb.index.highlights(in: p.name, for: outcome).map { String(decoding: bytes[$0], as: UTF8.self) }
        #expect(marked == ["Молоко", "3,2"], "\(p.name): \(marked)")
        // A prefix match marks only the typed part.
        let (_, typed) = search("пельм")
        let q = spb.products[Int(typed.hits[0].product)]
        let qb = Array(q.name.utf8)
        #expect(spb.index.highlights(in: q.name, for: typed).map { String(decoding: qb[$0], as: UTF8.self) } == ["Пельм"], "\(q.name)")
    }

    @Test func aShelfFilterKeepsOnlyItsProducts() {
        let shelf = 3
        let range = spb.index.products(ofShelf: shelf)
        let outcome = spb.index.search("а", filter: SearchFilter(products: range), limit: 1000, stemmer: Stemmer()) { _ in false }
        #expect(outcome.hits.allSatisfy { range.contains($0.product) })
    }

    @Test func aRenameIsIndexedAndAPriceChangeKeepsTheIndex() {
        var shelf = spb.store.departments[0].shelves[0]
        let position = 0
        var repriced = shelf.products
        repriced[0].price.minorUnits += 100
        let same = spb.index.replacing([(position, repriced, shelf.name, spb.store.departments[0].name)], stemmer: Stemmer())
        #expect(same === spb.index)
        shelf.products[0].name = "Ряженка особая"
        let renamed = spb.index.replacing([(position, shelf.products, shelf.name, spb.store.departments[0].name)], stemmer: Stemmer())
        #expect(renamed !== spb.index)
        let hits = renamed.search("ряженка особая", limit: 3, stemmer: Stemmer()) { _ in false }.hits
        #expect(hits.first?.product == 0 && hits.first?.matchedWords == 2)
    }

    @Test func anAllDigitQueryFindsTheBarcodeFirstAndShortNumbersDoNot() {
        var shelves: [SearchShelf] = []
        for d in spb.store.departments {
            for s in d.shelves { shelves.append(SearchShelf(uid: s.uid, name: s.name, departmentName: d.name, products: s.products)) }
        }
        // Two products with barcodes sharing their first 12 digits, one far
        // down the store so that order of position cannot fake the result.
        let last = shelves.count - 1
        shelves[last].products[0].barcode = "4600000000017"
        shelves[2].products[1].barcode = "4600000000024"
        let index = SearchIndex(shelves: shelves, stemmer: Stemmer())
        let lastProduct = index.products(ofShelf: last).lowerBound
        let second = index.products(ofShelf: 2).lowerBound + 1
        let exact = index.search("4600000000017", limit: 5, stemmer: Stemmer()) { _ in false }
        #expect(exact.hits.map(\.product) == [lastProduct] && exact.total == 1)
        // Typed as far as the shared digits: both, in barcode order; spaces around are ignored.
        let typed = index.search(" 460000000001 ", limit: 5, stemmer: Stemmer()) { _ in false }
        #expect(typed.hits.prefix(1).map(\.product) == [lastProduct])
        let both = index.search("46000000000", limit: 5, stemmer: Stemmer()) { _ in false }
        #expect(Array(both.hits.prefix(2).map(\.product)) == [lastProduct, second])
        // Filters apply to barcode hits too.
        let out = index.search("4600000000017", filter: SearchFilter(inStockOnly: true), limit: 5, stemmer: Stemmer()) { $0 == lastProduct }
        #expect(out.hits.isEmpty)
        let elsewhere = index.search("4600000000017", filter: SearchFilter(products: index.products(ofShelf: 0)), limit: 5, stemmer: Stemmer()) { _ in false }
        #expect(elsewhere.hits.isEmpty)
        // Fewer than 8 digits is a number, not a barcode; a word beside digits never reads barcodes.
        #expect(index.search("4600000", limit: 5, stemmer: Stemmer()) { _ in false }.hits.allSatisfy { $0.product != lastProduct })
        #expect(index.search("молоко 4600000000017", limit: 50, stemmer: Stemmer()) { _ in false }.hits.allSatisfy { $0.product != lastProduct })
        // A barcode change is a change of the shelf's words: the shelf is read again.
        var changed = shelves[last].products
        changed[0].barcode = "4600000000031"
        let next = index.replacing([(last, changed, shelves[last].name, shelves[last].departmentName)], stemmer: Stemmer())
        #expect(next !== index)
        #expect(next.search("4600000000031", limit: 5, stemmer: Stemmer()) { _ in false }.hits.map(\.product) == [lastProduct])
        #expect(next.search("4600000000017", limit: 5, stemmer: Stemmer()) { _ in false }.hits.isEmpty)
    }

    @Test func anImportReReadsOnlyTheShelvesItTouched() {
        var shelves: [SearchShelf] = []
        for d in spb.store.departments {
            for s in d.shelves { shelves.append(SearchShelf(uid: s.uid, name: s.name, departmentName: d.name, products: s.products)) }
        }
        let same = SearchIndex.build(shelves: shelves, reusing: spb.index, stemmer: Stemmer())
        #expect(same.index === spb.index && same.reread == 0)
        shelves[5].products[0].name = "Ряженка особая"
        let one = SearchIndex.build(shelves: shelves, reusing: spb.index, stemmer: Stemmer())
        #expect(one.reread == 1)
        let hits = one.index.search("ряженка особая", limit: 1, stemmer: Stemmer()) { _ in false }.hits
        #expect(hits.first?.matchedWords == 2 && hits.first?.product == one.index.products(ofShelf: 5).lowerBound)
        // Most of the store changed: a fresh index (and a fresh vocabulary).
        for i in shelves.indices { shelves[i].products = shelves[i].products.map { var p = $0; p.name += " новинка"; return p } }
        #expect(SearchIndex.build(shelves: shelves, reusing: spb.index, stemmer: Stemmer()).reread == shelves.count)
    }

    private func product(_ uid: String, _ name: String, brand: String = "", out: Bool = false) -> Product {
        Product(uid: uid, name: name, brand: brand, unit: "pcs", unitSize: 1, price: Money(minorUnits: 100, currency: "RUB"),
                imageURL: "", outOfStock: out, oftenOutOfStock: false, shelfUID: "s")
    }
}
