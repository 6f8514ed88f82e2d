import GroserClient
import GroserSystem

/// Output for people: trees, aligned columns, prices as "89.90 ₽". Every
/// string from the server enters it through `TerminalText`, escaped.
public enum HumanOutput {
    /// Whether prices group their thousands: on a terminal, for a person;
    /// not in a pipe, where a script reads the number.
    static let groupsThousands = ProcessInfo.isTerminal(1)

    /// Whether output may carry colour and bold: only on a terminal, and
    /// never when `NO_COLOR` is set to anything but empty (no-color.org).
    static let usesColour = ProcessInfo.isTerminal(1) && (ProcessInfo.environment("NO_COLOR") ?? "").isEmpty

    /// "89.90 ₽" for RUB, "1,500 JPY" on a terminal for a currency without
    /// decimals, "12.50 USD" for currencies without a symbol here: as many
    /// decimals as the currency has (ISO 4217), thousands grouped with ","
    /// when `grouped`.
    public static func price(_ money: Money) -> String { price(money, grouped: groupsThousands) }

    /// `price(_:)` with grouping chosen by the caller.
    public static func price(_ money: Money, grouped: Bool) -> String {
        let digits = Money.exponent(of: money.currency)
        let negative = money.minorUnits < 0
        let magnitude = money.minorUnits.magnitude
        var scale: UInt64 = 1
        for _ in 0..<digits { scale *= 10 }
        var text = String(magnitude / scale)
        if grouped {
            var groupedText = ""
            for (i, c) in text.enumerated() {
                if i > 0 && (text.count - i) % 3 == 0 { groupedText += "," }
                groupedText.append(c)
            }
            text = groupedText
        }
        if digits > 0 {
            let fraction = String(magnitude % scale)
            text += "." + String(repeating: "0", count: digits - fraction.count) + fraction
        }
        let symbol = ["RUB": "₽", "USD": "$", "EUR": "€"][money.currency] ?? money.currency
        return (negative ? "-" : "") + text + " " + symbol
    }

    static func size(_ p: Product) -> String { "\(p.unitSize) \(p.unit)" }

    static func cities(_ list: CityList) -> TerminalText {
        var rows: [[String]] = [["CODE", "CITY", "STORES", "DEFAULT STORE"]]
        for c in list.cities {
            let def = c.stores.first { $0.uid == c.defaultStoreUID }
            rows.append([c.code, c.name, String(c.stores.count), def.map { "\($0.name) (\($0.uid))" } ?? c.defaultStoreUID])
        }
        return table(rows)
    }

    static func stores(_ list: StoreList) -> TerminalText {
        var rows: [[String]] = [["UID", "STORE", "ADDRESS", "DEFAULT", "VERSION"]]
        for s in list.stores {
            rows.append([s.summary.uid, s.summary.name, s.summary.address, s.isDefault ? "yes" : "", String(s.storeVersion)])
        }
        return table(rows)
    }

    static func store(_ v: StoreCatalog, includeProducts: Bool) -> TerminalText {
        let s = v.store
        let shelves = s.departments.reduce(0) { $0 + $1.shelves.count }
        let products = s.departments.reduce(0) { $0 + $1.shelves.reduce(0) { $0 + Int($1.productCount) } }
        var out: TerminalText = "\(s.summary.name) · \(s.summary.chain) · \(s.uid)\n"
        out += "\(s.summary.address) · \(v.city.name) (\(v.city.code))\n"
        out += "\(s.departments.count) departments, \(shelves) shelves, \(products) products · catalog version \(v.catalogVersion)\n"
        for (di, d) in s.departments.enumerated() {
            let lastDept = di == s.departments.count - 1
            out += "\(lastDept ? "└── " : "├── ")\(d.name)\n"
            let deptPad = lastDept ? "    " : "│   "
            for (hi, h) in d.shelves.enumerated() {
                let lastShelf = hi == d.shelves.count - 1
                out += "\(deptPad)\(lastShelf ? "└── " : "├── ")\(h.name) · \(h.productCount) products · \(h.uid)\n"
                guard includeProducts else { continue }
                let shelfPad = deptPad + (lastShelf ? "    " : "│   ")
                for (pi, p) in h.products.enumerated() {
                    out += "\(shelfPad)\(pi == h.products.count - 1 ? "└── " : "├── ")\(productLine(p))\n"
                }
            }
        }
        return out
    }

    static func productLine(_ p: Product) -> TerminalText {
        var line: TerminalText = "\(p.name) · \(size(p)) · \(price(p.price))"
        if p.outOfStock { line += " · out of stock" } else if p.oftenOutOfStock { line += " · often out of stock" }
        return line + " · \(p.uid)"
    }

    static func shelf(_ v: ShelfContents) -> TerminalText {
        let out: TerminalText = "\(v.shelf.name) · \(v.shelf.productCount) products · \(v.shelf.uid) (store \(v.storeUID))\n"
        var rows: [[String]] = [["PRODUCT", "BRAND", "SIZE", "PRICE", "STOCK", "UID"]]
        for p in v.shelf.products {
            rows.append([p.name, p.brand, size(p), price(p.price),
                         p.outOfStock ? "out" : (p.oftenOutOfStock ? "often out" : "in stock"), p.uid])
        }
        return out + table(rows, rightAligned: [3])
    }

    /// A cart as a table. `acceptedPrices` is true for the answer to
    /// `cart --accept-prices`: the lines the server still marks are the ones
    /// just accepted (PROTOCOL.md 7.3), shown as accepted, not as pending.
    static func cart(_ c: Cart, acceptedPrices: Bool = false) -> TerminalText {
        if c.lines.isEmpty { return "The cart at \(c.storeUID) is empty (version \(c.version)).\n" }
        var out: TerminalText = "Cart at \(c.storeUID) · version \(c.version)\n"
        var rows: [[String]] = [["PRODUCT", "UID", "PRICE", "QTY", "TOTAL", ""]]
        for l in c.lines {
            var note = ""
            if l.priceChanged, let before = l.previousPrice {
                note = acceptedPrices ? "price accepted (was \(price(before)))" : "price changed from \(price(before))"
            }
            if l.outOfStock { note += note.isEmpty ? "out of stock" : "; out of stock" }
            rows.append([l.name, l.productUID, price(l.unitPrice), String(l.quantity), price(l.lineTotal), note])
        }
        rows.append(["SUBTOTAL", "", "", String(c.itemCount), price(c.subtotal), ""])
        out += table(rows, rightAligned: [2, 3, 4])
        if c.lines.contains(where: \.priceChanged) {
            out += acceptedPrices
                ? "The new prices are accepted: checkout with --expect-version \(c.version) charges them.\n"
                : "Changed prices are not accepted yet: checkout refuses them until 'groser-client cart --accept-prices'.\n"
        }
        return out
    }

    static func order(_ o: Order) -> TerminalText {
        var out: TerminalText = "\(o.number) · \(o.cityCode) · \(o.storeUID) · \(date(o.createdAtUnix)) · \(o.cardBrand) •••• \(o.cardLast4)\n"
        out += "deliver to \(o.deliveryAddress)\n"
        var rows: [[String]] = [["PRODUCT", "PRICE", "QTY", "TOTAL"]]
        for l in o.lines { rows.append([l.name, price(l.unitPrice), String(l.quantity), price(l.lineTotal)]) }
        rows.append(["TOTAL", "", "", price(o.total)])
        return out + table(rows, rightAligned: [1, 2, 3])
    }

    /// "2026-12-02 16:45 UTC".
    static func date(_ unix: Int64) -> String {
        let days = unix >= 0 ? unix / 86400 : (unix - 86399) / 86400
        let secs = unix - days * 86400
        // Civil from days (Howard Hinnant's algorithm).
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(y)-\(two(m))-\(two(d)) \(two(secs / 3600)):\(two(secs / 60 % 60)) UTC"
    }

    static func info(_ v: ServerInfo, socket: String) -> TerminalText {
        let seconds = v.uptimeMilliseconds / 1000
        return """
        server:           \(v.serverVersion)
        protocol:         \(v.protocolVersion)
        socket:           \(socket)
        uptime:           \(seconds / 3600)h \(seconds / 60 % 60)m \(seconds % 60)s
        catalog version:  \(v.catalogVersion)
        methods:          \(v.methods.joined(separator: ", "))

        """
    }

    /// Columns padded to their widest cell, counted in terminal cells once
    /// escaped (a CJK character or an emoji takes two, an accent none).
    static func table(_ cells: [[String]], rightAligned: Set<Int> = []) -> TerminalText {
        let rows = cells.map { $0.map(Terminal.safe) }
        guard let first = rows.first else { return "" }
        var widths = [Int](repeating: 0, count: first.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], CellWidth.of(cell)) } }
        var out: TerminalText = ""
        for row in rows {
            var line = ""
            for (i, cell) in row.enumerated() {
                let pad = String(repeating: " ", count: widths[i] - CellWidth.of(cell))
                let isLast = i == row.count - 1
                line += rightAligned.contains(i) ? pad + cell : (isLast ? cell : cell + pad)
                if !isLast { line += "  " }
            }
            while line.last == " " { line.removeLast() }
            // The cells were escaped above, and the rest is spaces.
            out += TerminalText(alreadySafe: line + "\n")
        }
        return out
    }
}
