import GroserClient
import GroserCommandLine
import GroserSystem

// groser-client products: some products of one store by uid, and its output.

extension Commands {
    static let products = Subcommand(
        name: "products",
        abstract: "Shows products of one store by uid, in the order given, and the uids the store does not sell.",
        options: [
            OptionSpec(name: "--store", valueName: "UID", help: "the store's uid, e.g. store-spb-1", isRequired: true),
            ListFormat.option,
        ],
        arguments: [ArgumentSpec("UIDS", "product uids separated by commas, at most 200")],
        validate: { parsed throws(UsageError) in
            let store = parsed.values["--store"] ?? ""
            guard !store.isEmpty else { throw UsageError("--store needs a non-empty value") }
            let uids = parsed.positionals[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !uids.contains("") else { throw UsageError("the product uids contain an empty one") }
            let format = ListFormat(parsed)
            return { ctx in
                let v = try ctx.client().products(uids, in: store)
                ctx.printList(.getProducts(v), path: ["products"], format: format, human: HumanOutput.products(v, store: store))
            }
        })
}

extension HumanOutput {
    static func products(_ v: GetProductsResponse, store: String) -> TerminalText {
        var out: TerminalText = "\(v.products.count) of \(v.products.count + v.missingUIDs.count) products found at \(store) (store version \(v.storeVersion))\n"
        if !v.products.isEmpty {
            var rows: [[String]] = [["PRODUCT", "BRAND", "SIZE", "PRICE", "STOCK", "UID"]]
            for p in v.products {
                rows.append([p.name, p.brand, size(p), price(p.price),
                             p.outOfStock ? "out" : (p.oftenOutOfStock ? "often out" : "in stock"), p.uid])
            }
            out += table(rows, rightAligned: [3])
        }
        if !v.missingUIDs.isEmpty { out += "Not sold here: \(v.missingUIDs.joined(separator: ", "))\n" }
        return out
    }
}
