import GroserSystem
/// How a query word matched a word of the index. The order is the
/// ranking's: exact beats stemmed beats prefix beats typo.
public enum MatchKind: UInt8, Sendable, Comparable {
    case exact = 0
    /// The same Snowball stem: "молока" for "молоко".
    case stemmed = 1
    /// The last query word begins the word: "пельм" for "пельмени".
    case prefix = 2
    /// One typo (words of 5 to 8 letters) or two (9 and more) away, from
    /// the word, its stem or, for the last query word, its beginning.
    case typo = 3

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// What a search asks besides the query.
public struct SearchFilter: Sendable {
    public var inStockOnly: Bool
    /// Only products in these positions (a department's or a shelf's); nil for all.
    public var products: Range<UInt32>?

    public init(inStockOnly: Bool = false, products: Range<UInt32>? = nil) {
        self.inStockOnly = inStockOnly
        self.products = products
    }
}

/// A search's answer, best first.
public struct SearchOutcome: Sendable {
    public struct Hit: Sendable, Hashable {
        /// The product's position in the store.
        public var product: UInt32
        /// How many of the query's words it matched.
        public var matchedWords: Int
    }

    /// The first `limit` hits asked for, in rank order.
    public var hits: [Hit]
    /// Every product that matched at least one word, after the filter.
    public var total: Int
    /// The query's words as searched (normalised), space-separated.
    public var queryUsed: String
    /// The query was read as typed on the other keyboard layout.
    public var layoutSwitched: Bool
    /// Which words of the index matched, and how much of each to mark in
    /// a name: nil for the whole word, else the first that many UTF-8 bytes
    /// (a prefix match).
    var marked: [UInt32: Int?]
}

extension SearchIndex {
    /// At most this many words of a query are searched; the rest are ignored.
    public static let maximumQueryWords = 12
    /// A prefix that begins more words than this matches only the first ones (in byte order).
    static let maximumPrefixWords = 2000

    /// Searches the index. `outOfStock(product)` reads the product's stock
    /// in the catalog version being answered from. The last word is also
    /// matched as a prefix unless the query ends with a space. When no
    /// product matches every word, the query is tried as typed on the other
    /// keyboard layout, and that reading wins when it matches more words.
    /// A query of 8 to 13 digits alone also finds the products whose
    /// barcode begins with it, ranked before every word match.
    public func search(_ query: String, filter: SearchFilter = SearchFilter(), limit: Int, stemmer: Stemmer,
                       outOfStock: (UInt32) -> Bool) -> SearchOutcome {
        var outcome = searchWords(query, filter: filter, limit: limit, stemmer: stemmer, outOfStock: outOfStock)
        let range = filter.products ?? 0..<UInt32(productCount)
        let coded = barcodes.products(matching: query.trimmingSpaces).filter {
            range.contains($0) && !(filter.inStockOnly && outOfStock($0))
        }
        guard !coded.isEmpty else { return outcome }
        let codedSet = Set(coded)
        let words = outcome.hits.filter { !codedSet.contains($0.product) }
        outcome.total += coded.count - (outcome.hits.count - words.count)
        outcome.hits = Array((coded.map { SearchOutcome.Hit(product: $0, matchedWords: 1) } + words).prefix(limit))
        return outcome
    }

    private func searchWords(_ query: String, filter: SearchFilter, limit: Int, stemmer: Stemmer,
                             outOfStock: (UInt32) -> Bool) -> SearchOutcome {
        let first = run(query, filter: filter, limit: limit, stemmer: stemmer, outOfStock: outOfStock)
        if first.best < first.words, let other = KeyboardLayout.switched(query) {
            let second = run(other, filter: filter, limit: limit, stemmer: stemmer, outOfStock: outOfStock)
            if second.best > first.best {
                var outcome = second.outcome
                outcome.layoutSwitched = true
                return outcome
            }
        }
        return first.outcome
    }

    private func run(_ query: String, filter: SearchFilter, limit: Int, stemmer: Stemmer,
                     outOfStock: (UInt32) -> Bool) -> (outcome: SearchOutcome, best: Int, words: Int) {
        let tokens = Array(Tokenizer.tokens(query, keepParts: false).prefix(Self.maximumQueryWords))
        let prefixLast = query.unicodeScalars.last.map { $0.properties.isAlphabetic || ("0"..."9").contains($0) } ?? false
        var marked: [UInt32: Int?] = [:]
        if stemmer.scratch.count < productCount { stemmer.scratch = [UInt64](repeating: 0, count: productCount) }
        var touched: [UInt32] = []
        let range = filter.products ?? 0..<UInt32(productCount)
        var keys: [UInt64] = []
        stemmer.scratch.withUnsafeMutableBufferPointer { state in
        for (i, token) in tokens.enumerated() {
            let isLast = prefixLast && i == tokens.count - 1
            let shift = UInt64(i * 4)
            for (word, kind) in candidates(token, isLast: isLast, stemmer: stemmer) {
                if kind == .prefix {
                    if marked[word] == nil { marked[word] = .some(token.bytes.count) }
                } else {
                    marked[word] = .some(nil)
                }
                func note(_ product: UInt32, _ field: UInt32) {
                    guard range.contains(product) else { return }
                    let code = UInt64(kind.rawValue) * 3 + UInt64(field) + 1
                    let s = state[Int(product)]
                    if s == 0 { touched.append(product) }
                    let current = (s >> shift) & 0xf
                    if current == 0 || code < current {
                        state[Int(product)] = (s & ~(0xf << shift)) | (code << shift)
                    }
                }
                for p in postings[Int(word)] { note(p >> 2, p & 3) }
                for s in shelfPostings[Int(word)] {
                    let shelf = Int(s >> 1)
                    for product in shelfStarts[shelf]..<shelfStarts[shelf + 1] { note(product, SearchField.shelf.rawValue) }
                }
            }
        }
        keys.reserveCapacity(touched.count)
        for product in touched {
            let s = state[Int(product)]
            state[Int(product)] = 0
            var matched: UInt64 = 0, kinds: UInt64 = 0, fields: UInt64 = 0
            for i in 0..<tokens.count {
                let code = (s >> UInt64(i * 4)) & 0xf
                guard code != 0 else { continue }
                matched += 1
                kinds += (code - 1) / 3
                fields += (code - 1) % 3
            }
            let out = outOfStock(product)
            if out && filter.inStockOnly { continue }
            keys.append((UInt64(Self.maximumQueryWords) - matched) << 56 | kinds << 48 | fields << 40
                        | (out ? 1 << 39 : 0) | UInt64(product))
        }
        }
        let total = keys.count
        let take = min(limit, total)
        Self.partialSort(&keys, first: take)
        var hits: [SearchOutcome.Hit] = []
        hits.reserveCapacity(take)
        for k in keys.prefix(take) {
            hits.append(SearchOutcome.Hit(product: UInt32(truncatingIfNeeded: k & 0xffff_ffff),
                                          matchedWords: Self.maximumQueryWords - Int(k >> 56)))
        }
        let best = keys.isEmpty ? 0 : Self.maximumQueryWords - Int(keys.min()! >> 56)
        let outcome = SearchOutcome(hits: hits, total: total, queryUsed: tokens.map(\.text).joined(separator: " "),
                                    layoutSwitched: false, marked: marked)
        return (outcome, best, tokens.count)
    }

    /// The words of the index `token` matches, each with its best kind.
    func candidates(_ token: Token, isLast: Bool, stemmer: Stemmer) -> [(UInt32, MatchKind)] {
        var found: [UInt32: MatchKind] = [:]
        func add(_ id: UInt32, _ kind: MatchKind) {
            if let k = found[id], k <= kind { return }
            found[id] = kind
        }
        let v = vocabulary
        if let id = v.ids[WordKey(token.bytes)] { add(id, .exact) }
        if token.kind == .word, let stem = v.stemIDs[WordKey(stemmer.stem(bytes: token.bytes, script: token.script))] {
            for id in v.wordsOfStem[Int(stem)] { add(id, .stemmed) }
        }
        if isLast {
            let q = token.bytes
            var lo = 0, hi = v.sorted.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if v.words[Int(v.sorted[mid])].utf8.lexicographicallyPrecedes(q) { lo = mid + 1 } else { hi = mid }
            }
            var n = 0
            while lo < v.sorted.count, n < Self.maximumPrefixWords {
                let id = v.sorted[lo]
                guard v.words[Int(id)].utf8.starts(with: q) else { break }
                add(id, .prefix)
                lo += 1
                n += 1
            }
        }
        // Typos only for a word the store has no better match for: a word
        // spelled right would only gain matches ranked below its own.
        let letters = token.text.unicodeScalars.count
        if found.isEmpty && token.kind == .word && letters >= 5 {
            let limit = letters >= 9 ? 2 : 1
            let q = token.text.unicodeScalars.map(\.value)
            let stemmed = stemmer.stem(token.text, script: token.script).unicodeScalars.map(\.value)
            for s in 0..<v.stemScalars.count where abs(v.stemScalars.length(s) - stemmed.count) <= limit {
                if EditDistance.within(stemmed, v.stemScalars[s], limit: limit) != nil {
                    for id in v.wordsOfStem[s] { add(id, .typo) }
                }
            }
            for w in 0..<v.scalars.count where v.kinds[w] == .word {
                let word = v.scalars[w]
                if word.count + limit < q.count { continue }
                if !isLast && abs(word.count - q.count) > limit { continue }
                if EditDistance.within(q, word, limit: limit) != nil
                    || (isLast && EditDistance.toPrefix(q, of: word, limit: limit) != nil) {
                    add(UInt32(w), .typo)
                }
            }
        }
        return found.map { ($0.key, $0.value) }.sorted { $0.0 < $1.0 }
    }

    /// Orders the first `first` elements of `keys` ascending, and leaves
    /// the rest after them in any order.
    static func partialSort(_ keys: inout [UInt64], first: Int) {
        guard first > 0 else { return }
        if first * 4 >= keys.count {
            keys.sort()
            return
        }
        // Quickselect the first `first`, then sort them.
        var lo = 0, hi = keys.count - 1
        let target = first - 1
        while lo < hi {
            let pivot = keys[(lo + hi) / 2]
            var i = lo, j = hi
            while i <= j {
                while keys[i] < pivot { i += 1 }
                while keys[j] > pivot { j -= 1 }
                if i <= j { keys.swapAt(i, j); i += 1; j -= 1 }
            }
            if target <= j { hi = j } else if target >= i { lo = i } else { break }
        }
        keys[0..<first].sort()
    }

    /// The runs of `name` (a hit's product name) to mark for `outcome`:
    /// UTF-8 byte offsets, ascending, not overlapping.
    public func highlights(in name: String, for outcome: SearchOutcome) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        for t in Tokenizer.tokens(name) {
            guard let id = vocabulary.ids[WordKey(t.bytes)], let mark = outcome.marked[id] else { continue }
            let end = mark.map { min(t.end, t.start + $0) } ?? t.end
            ranges.append(t.start..<end)
        }
        ranges.sort { $0.lowerBound < $1.lowerBound }
        var merged: [Range<Int>] = []
        for r in ranges {
            if let last = merged.last, r.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, r.upperBound)
            } else {
                merged.append(r)
            }
        }
        return merged
    }

    /// The product range of shelf `shelf` (a position in the store's order).
    public func products(ofShelf shelf: Int) -> Range<UInt32> { shelfStarts[shelf]..<shelfStarts[shelf + 1] }

    /// The product range of shelves `shelves` (consecutive positions).
    public func products(ofShelves shelves: Range<Int>) -> Range<UInt32> {
        shelves.isEmpty ? 0..<0 : shelfStarts[shelves.lowerBound]..<shelfStarts[shelves.upperBound]
    }

    /// The shelf position of product `product`.
    public func shelfPosition(ofProduct product: UInt32) -> Int { shelf(ofProduct: product) }
}
