import GroserWire

/// What a shelf gives the index: its name, its department's, and its
/// products in the order the catalog serves them.
public struct SearchShelf: Sendable {
    public var uid: String
    public var name: String
    public var departmentName: String
    public var products: [Product]

    public init(uid: String = "", name: String, departmentName: String, products: [Product]) {
        self.uid = uid
        self.name = name
        self.departmentName = departmentName
        self.products = products
    }
}

/// Where a word was found. The order is the ranking's: a match in a name
/// beats one in a brand, which beats one in a shelf or department name.
public enum SearchField: UInt32, Sendable, Comparable {
    /// The product's name, and its pack size ("930мл").
    case name = 0
    case brand = 1
    /// The name of the product's shelf or department.
    case shelf = 2

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The words of one store, numbered: every word its products, shelves and
/// departments use, with its stem. Immutable; a change that brings new
/// words builds the next one from this one.
final class Vocabulary: Sendable {
    let words: [String]
    let ids: [WordKey: UInt32]
    /// Each word's Unicode scalars, for typo matching.
    let scalars: FlatLists
    let kinds: [Token.Kind]
    let stemOf: [UInt32]
    let stems: [String]
    let stemIDs: [WordKey: UInt32]
    let stemScalars: FlatLists
    let wordsOfStem: FlatLists
    /// Word ids ordered by the words' UTF-8 bytes: the prefix ranges.
    let sorted: [UInt32]

    init(_ b: VocabularyBuilder) {
        words = b.words
        ids = b.ids
        scalars = FlatLists(b.scalars)
        kinds = b.kinds
        stemOf = b.stemOf
        stems = b.stems
        stemIDs = b.stemIDs
        stemScalars = FlatLists(b.stemScalars)
        wordsOfStem = FlatLists(b.wordsOfStem)
        sorted = b.words.indices.sorted { b.words[$0].utf8.lexicographicallyPrecedes(b.words[$1].utf8) }.map(UInt32.init)
    }

    var count: Int { words.count }

    /// Bytes held, roughly: strings, arrays and the dictionaries' entries.
    var memoryBytes: Int {
        var n = 0
        for w in words { n += 16 + (w.utf8.count > 15 ? w.utf8.count + 32 : 0) }
        n += scalars.memoryBytes + stemScalars.memoryBytes + wordsOfStem.memoryBytes
        n += ids.count * 48 + stemIDs.count * 48 + stems.count * 16 + sorted.count * 4 + stemOf.count * 4 + kinds.count
        return n
    }
}

/// Numbers words while an index is built; starts from a vocabulary to add to it.
struct VocabularyBuilder {
    var words: [String] = []
    var ids: [WordKey: UInt32] = [:]
    var scalars: [[UInt32]] = []
    var kinds: [Token.Kind] = []
    var stemOf: [UInt32] = []
    var stems: [String] = []
    var stemIDs: [WordKey: UInt32] = [:]
    var stemScalars: [[UInt32]] = []
    var wordsOfStem: [[UInt32]] = []
    private(set) var added = 0
    let base: Vocabulary?
    /// The pack-size words of each (unit, size) seen, by word id.
    private var packs: [UInt64: [UInt32]] = [:]

    init(from base: Vocabulary? = nil) {
        self.base = base
        if let base {
            words = base.words; ids = base.ids; scalars = base.scalars.lists; kinds = base.kinds; stemOf = base.stemOf
            stems = base.stems; stemIDs = base.stemIDs; stemScalars = base.stemScalars.lists; wordsOfStem = base.wordsOfStem.lists
        }
    }

    mutating func id(of token: Token, stemmer: Stemmer) -> UInt32 {
        let key = WordKey(token.bytes)
        if let id = ids[key] { return id }
        let id = UInt32(words.count)
        let text = token.text
        words.append(text)
        ids[key] = id
        scalars.append(text.unicodeScalars.map(\.value))
        kinds.append(token.kind)
        let stemBytes = token.kind == .word ? stemmer.stem(bytes: token.bytes, script: token.script) : token.bytes
        let stemKey = WordKey(stemBytes)
        let stem = String(decoding: stemBytes, as: UTF8.self)
        let stemID: UInt32
        if let s = stemIDs[stemKey] {
            stemID = s
            wordsOfStem[Int(s)].append(id)
        } else {
            stemID = UInt32(stems.count)
            stems.append(stem)
            stemIDs[stemKey] = stemID
            stemScalars.append(stem.unicodeScalars.map(\.value))
            wordsOfStem.append([id])
        }
        stemOf.append(stemID)
        added += 1
        return id
    }

    /// The ids of the quantities a pack size gives ("930мл", "0.93л").
    mutating func packIDs(unit: String, size: UInt32, stemmer: Stemmer) -> [UInt32] {
        let code: UInt64 = unit == "ml" ? 1 : unit == "g" ? 2 : unit == "pcs" ? 3 : 0
        guard code != 0 else { return [] }
        let key = code << 32 | UInt64(size)
        if let ids = packs[key] { return ids }
        let ids = Units.packTokens(unit: unit, size: size).map {
            id(of: Token(text: $0, kind: .quantity, script: .other, start: 0, end: 0), stemmer: stemmer)
        }
        packs[key] = ids
        return ids
    }

    /// The vocabulary: the base itself when nothing was added.
    func finish() -> Vocabulary {
        if added == 0, let base { return base }
        return Vocabulary(self)
    }
}

/// One shelf's words: each product's word ids with their fields (the
/// forward index), and the shelf's and department's names. Shared by index
/// versions until the shelf's names change.
final class ShelfWords: Sendable {
    let uid: String
    /// What the shelf's and department's names were.
    let names: String
    /// Per product, from `starts[i]` to `starts[i + 1]`: word id << 2 | field.
    let tokens: [UInt32]
    let starts: [UInt32]
    let shelfWords: [UInt32]
    let departmentWords: [UInt32]
    /// Per product, its EAN-13 barcode as a number, 0 for none.
    let barcodes: [UInt64]
    /// What the words were read from, to tell whether a change renamed anything.
    let fingerprint: [UInt64]

    init(_ shelf: SearchShelf, vocabulary: inout VocabularyBuilder, stemmer: Stemmer) {
        uid = shelf.uid
        names = Self.names(shelf)
        var tokens: [UInt32] = []
        var starts: [UInt32] = [0]
        var prints: [UInt64] = []
        var barcodes: [UInt64] = []
        tokens.reserveCapacity(shelf.products.count * 8)
        for p in shelf.products {
            var mine: [UInt32] = []
            func add(_ id: UInt32, _ field: SearchField) {
                let packed = id << 2 | field.rawValue
                if !mine.contains(packed) { mine.append(packed) }
            }
            for t in Tokenizer.tokens(p.name) { add(vocabulary.id(of: t, stemmer: stemmer), .name) }
            for id in vocabulary.packIDs(unit: p.unit, size: p.unitSize, stemmer: stemmer) { add(id, .name) }
            for t in Tokenizer.tokens(p.brand) { add(vocabulary.id(of: t, stemmer: stemmer), .brand) }
            tokens.append(contentsOf: mine)
            starts.append(UInt32(tokens.count))
            prints.append(Self.fingerprint(p))
            barcodes.append(Barcodes.number(p.barcode) ?? 0)
        }
        self.tokens = tokens
        self.barcodes = barcodes
        self.starts = starts
        shelfWords = Tokenizer.tokens(shelf.name).map { vocabulary.id(of: $0, stemmer: stemmer) }
        departmentWords = Tokenizer.tokens(shelf.departmentName).map { vocabulary.id(of: $0, stemmer: stemmer) }
        fingerprint = prints
    }

    var productCount: Int { starts.count - 1 }

    static func names(_ shelf: SearchShelf) -> String { shelf.name + "\u{0}" + shelf.departmentName }

    /// Whether `shelf` would index to these same words.
    func same(as shelf: SearchShelf) -> Bool { names == Self.names(shelf) && sameWords(as: shelf.products) }

    /// Whether `products` index to the same words as this shelf's.
    func sameWords(as products: [Product]) -> Bool {
        products.count == fingerprint.count && zip(products, fingerprint).allSatisfy { Self.fingerprint($0) == $1 }
    }

    /// FNV-1a over what the words come from: name, brand, unit and size.
    static func fingerprint(_ p: Product) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
            for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
            h = (h ^ 0xff) &* 0x0000_0100_0000_01b3
        }
        mix(p.name.utf8)
        mix(p.brand.utf8)
        mix(p.unit.utf8)
        mix(withUnsafeBytes(of: p.unitSize.littleEndian, Array.init))
        mix(p.barcode.utf8)
        return h
    }

    var memoryBytes: Int {
        96 + tokens.count * 4 + starts.count * 4 + shelfWords.count * 4 + departmentWords.count * 4 + fingerprint.count * 8
            + barcodes.count * 8
    }
}

/// A store's search index, in memory: its vocabulary, each shelf's words,
/// and the postings (which products, shelves and departments each word is
/// in). Products are numbered in the store's order (department by
/// department, shelf by shelf, as GetStore lists them). Immutable, so
/// every event loop searches it without a lock; a change builds the next
/// version from this one (`replacing`), re-reading only the shelves whose
/// names changed. Prices and stock are not in it: a search reads them from
/// the catalog version it answers from.
public final class SearchIndex: Sendable {
    let vocabulary: Vocabulary
    let shelves: [ShelfWords]
    /// The first product of each shelf, and the product count at the end.
    let shelfStarts: [UInt32]
    /// Per word id: product << 2 | field, ascending.
    let postings: FlatLists
    /// Per word id: shelf << 1 | 1 for a department name, 0 for a shelf's.
    let shelfPostings: FlatLists
    /// The store's barcodes, ascending, and the product of each.
    let barcodes: Barcodes

    public var productCount: Int { Int(shelfStarts.last ?? 0) }
    public var shelfCount: Int { shelves.count }

    /// Words no product, shelf or department uses any more.
    let unusedWords: Int

    /// Indexes a store's shelves, in the store's order.
    public convenience init(shelves: [SearchShelf], stemmer: Stemmer) {
        var vocabulary = VocabularyBuilder()
        let words = shelves.map { ShelfWords($0, vocabulary: &vocabulary, stemmer: stemmer) }
        self.init(vocabulary: vocabulary.finish(), shelves: words)
    }

    /// Indexes a store's shelves, taking from `previous` (the store's index
    /// before an import) every shelf whose words are the same, by uid: an
    /// import re-reads only the shelves it touched. A fresh index is built
    /// when most shelves changed or half the vocabulary would be words
    /// nothing uses, so memory follows the catalog, not its history.
    public static func build(shelves: [SearchShelf], reusing previous: SearchIndex?, stemmer: Stemmer) -> (index: SearchIndex, reread: Int) {
        guard let previous else { return (SearchIndex(shelves: shelves, stemmer: stemmer), shelves.count) }
        var old: [String: ShelfWords] = [:]
        for s in previous.shelves where !s.uid.isEmpty { old[s.uid] = s }
        var kept: [ShelfWords?] = shelves.map { shelf in old[shelf.uid].flatMap { $0.same(as: shelf) ? $0 : nil } }
        let reread = kept.filter { $0 == nil }.count
        guard reread * 4 <= shelves.count else { return (SearchIndex(shelves: shelves, stemmer: stemmer), shelves.count) }
        if reread == 0 && kept.count == previous.shelves.count && zip(kept, previous.shelves).allSatisfy({ $0 === $1 }) {
            return (previous, 0)
        }
        var vocabulary = VocabularyBuilder(from: previous.vocabulary)
        for i in kept.indices where kept[i] == nil {
            kept[i] = ShelfWords(shelves[i], vocabulary: &vocabulary, stemmer: stemmer)
        }
        let index = SearchIndex(vocabulary: vocabulary.finish(), shelves: kept.map { $0! })
        if index.unusedWords > 1000 && index.unusedWords * 2 > index.vocabulary.count {
            return (SearchIndex(shelves: shelves, stemmer: stemmer), shelves.count)
        }
        return (index, reread)
    }

    init(vocabulary: Vocabulary, shelves: [ShelfWords]) {
        self.vocabulary = vocabulary
        self.shelves = shelves
        var starts: [UInt32] = [0]
        starts.reserveCapacity(shelves.count + 1)
        var postings = [[UInt32]](repeating: [], count: vocabulary.count)
        var shelfPostings = [[UInt32]](repeating: [], count: vocabulary.count)
        var product: UInt32 = 0
        var barcodes: [(code: UInt64, product: UInt32)] = []
        for (s, shelf) in shelves.enumerated() {
            for i in 0..<shelf.productCount {
                if shelf.barcodes[i] != 0 { barcodes.append((shelf.barcodes[i], product)) }
                for k in Int(shelf.starts[i])..<Int(shelf.starts[i + 1]) {
                    let t = shelf.tokens[k]
                    postings[Int(t >> 2)].append(product << 2 | (t & 3))
                }
                product += 1
            }
            starts.append(product)
            for w in shelf.shelfWords where shelfPostings[Int(w)].last != UInt32(s) << 1 {
                shelfPostings[Int(w)].append(UInt32(s) << 1)
            }
            for w in shelf.departmentWords where shelfPostings[Int(w)].last != UInt32(s) << 1 | 1 {
                shelfPostings[Int(w)].append(UInt32(s) << 1 | 1)
            }
        }
        shelfStarts = starts
        unusedWords = zip(postings, shelfPostings).filter { $0.isEmpty && $1.isEmpty }.count
        self.postings = FlatLists(postings)
        self.shelfPostings = FlatLists(shelfPostings)
        self.barcodes = Barcodes(barcodes)
    }

    /// This index with some shelves' products replaced (shelf positions in
    /// the store's order), or this same index when none of their words
    /// changed (a price or stock change). Only the changed shelves are read
    /// again; the postings are relinked from every shelf's words.
    public func replacing(_ changed: [(shelf: Int, products: [Product], name: String, departmentName: String)],
                          stemmer: Stemmer) -> SearchIndex {
        let renamed = changed.filter { $0.shelf < shelves.count && !shelves[$0.shelf].sameWords(as: $0.products) }
        if renamed.isEmpty { return self }
        var vocabulary = VocabularyBuilder(from: self.vocabulary)
        var next = shelves
        for c in renamed {
            next[c.shelf] = ShelfWords(SearchShelf(uid: shelves[c.shelf].uid, name: c.name, departmentName: c.departmentName, products: c.products),
                                       vocabulary: &vocabulary, stemmer: stemmer)
        }
        return SearchIndex(vocabulary: vocabulary.finish(), shelves: next)
    }

    /// The shelf holding product `product`.
    func shelf(ofProduct product: UInt32) -> Int {
        var lo = 0, hi = shelfStarts.count - 2
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if shelfStarts[mid] <= product { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }

    /// Bytes the index holds, roughly (the Stats' search_index_bytes).
    public var memoryBytes: Int {
        var n = vocabulary.memoryBytes + shelfStarts.count * 4 + 64
        n += postings.memoryBytes + shelfPostings.memoryBytes + barcodes.memoryBytes
        for s in shelves { n += s.memoryBytes }
        return n
    }
}
