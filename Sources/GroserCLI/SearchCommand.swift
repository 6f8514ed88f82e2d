import GroserClient
import GroserCommandLine
import GroserSystem

// groser-client search: the command and its output, with the matched
// words marked.

extension Commands {
    static let search = Subcommand(
        name: "search",
        abstract: "Searches a store's products, best first, with the matched words marked.",
        discussion: """
        Matched words are bold on a terminal, [in brackets] otherwise. Without --city or --store, the city saved \
        by set-city is used.
        """,
        options: [
            ListFormat.option,
        ] + storeSelection + [
            OptionSpec(name: "--in-stock", valueName: nil, help: "leave out products that are out of stock"),
            OptionSpec(name: "--limit", valueName: "N", help: "show at most N products, 1 to 100", defaultValue: "10"),
            OptionSpec(name: "--by-shelf", valueName: nil, help: "group the products shelf by shelf"),
        ],
        arguments: [ArgumentSpec("QUERY", "what to look for, e.g. \"молоко 3,2\"; quote several words")],
        validate: { parsed throws(UsageError) in
            let query = parsed.positionals[0]
            let (city, store) = try storeChoice(parsed)
            let format = ListFormat(parsed)
            var limit: UInt32 = 10
            if let l = parsed.values["--limit"] {
                guard let n = UInt32(l), (1...100).contains(n) else { throw UsageError("--limit must be 1 to 100, not \"\(l)\"") }
                limit = n
            }
            let inStock = parsed.flags.contains("--in-stock")
            let byShelf = parsed.flags.contains("--by-shelf")
            return { (ctx) throws in
                let selector = try ctx.storeSelector(city: city, store: store)
                let v = try ctx.client().search(query, in: selector, pageSize: limit, inStockOnly: inStock, groupByShelf: byShelf)
                ctx.printList(.searchProducts(v), path: ["hits"], format: format,
                              human: HumanOutput.search(v, marking: HumanOutput.usesColour ? .bold : .brackets, byShelf: byShelf))
            }
        })
}

extension HumanOutput {
    enum Marking { case bold, brackets }

    /// A product name with its highlighted runs marked. The name is made
    /// safe piece by piece, so only the markers are the client's own.
    static func marked(_ name: String, _ ranges: [TextRange], _ marking: Marking) -> String {
        let bytes = Array(name.utf8)
        var out = ""
        var at = 0
        let (open, close) = marking == .bold ? ("\u{1b}[1m", "\u{1b}[22m") : ("[", "]")
        for r in ranges {
            let start = Int(r.start), end = Int(r.start) + Int(r.length)
            guard start >= at, end <= bytes.count, start < end else { continue }
            out += Terminal.safe(String(decoding: bytes[at..<start], as: UTF8.self))
            out += open + Terminal.safe(String(decoding: bytes[start..<end], as: UTF8.self)) + close
            at = end
        }
        return out + Terminal.safe(String(decoding: bytes[at...], as: UTF8.self))
    }

    static func search(_ v: SearchResults, marking: Marking, byShelf: Bool) -> TerminalText {
        var out: TerminalText = v.layoutSwitched ? "Showing results for \"\(v.queryUsed)\" (typed on the other keyboard layout)\n" : ""
        if v.hits.isEmpty { return out + "Nothing found in \(v.storeUID).\n" }
        out += "\(v.hits.count) of \(v.totalEstimate) products in \(v.storeUID)\n"
        var shelf = ""
        for h in v.hits {
            if byShelf && h.product.shelfUID != shelf {
                shelf = h.product.shelfUID
                out += "\n\(h.departmentName) › \(h.shelfName)\n"
            }
            let p = h.product
            var line = TerminalText(alreadySafe: marked(p.name, h.highlights, marking))
            line += " · \(size(p)) · \(price(p.price))"
            if p.outOfStock { line += " · out of stock" }
            out += "  " + line + " · \(p.uid)\n"
        }
        return out
    }
}
