import GroserClient

/// A JSON value with keys kept in the order written, so output is stable.
indirect enum JSON {
    case object([(String, JSON)])
    case array([JSON])
    case string(String)
    case number(String)
    case bool(Bool)

    /// Pretty-printed with two-space indents.
    func rendered(indent: String = "") -> String {
        switch self {
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            let inner = indent + "  "
            let body = fields.map { "\(inner)\(JSON.quote($0.0)): \($0.1.rendered(indent: inner))" }
            return "{\n" + body.joined(separator: ",\n") + "\n\(indent)}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            let inner = indent + "  "
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .string(let s): return JSON.quote(s)
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        }
    }

    /// On one line, with no spaces (JSON Lines).
    func compact() -> String {
        switch self {
        case .object(let fields): return "{" + fields.map { JSON.quote($0.0) + ":" + $0.1.compact() }.joined(separator: ",") + "}"
        case .array(let items): return "[" + items.map { $0.compact() }.joined(separator: ",") + "]"
        default: return rendered()
        }
    }

    /// A JSON string literal. Besides what JSON requires (", \\, and
    /// U+0000–U+001F), DEL and the C1 controls (U+0080–U+009F) are written
    /// as \\u00XX too, so `--json` output on a terminal cannot command it.
    static func quote(_ s: String) -> String { JSONString.quoted(s) }

    // Protobuf's JSON mapping: 64-bit integers are strings, 32-bit ones numbers.
    static func int64(_ n: Int64) -> JSON { .string(String(n)) }
    static func uint64(_ n: UInt64) -> JSON { .string(String(n)) }
    static func uint32(_ n: UInt32) -> JSON { .number(String(n)) }
}

/// The catalog as Protobuf's JSON mapping writes it: lowerCamelCase field
/// names, every field present (defaults included) so scripts can rely on it.
enum ProtoJSON {
    static func money(_ m: Money) -> JSON {
        .object([("minorUnits", .int64(m.minorUnits)), ("currency", .string(m.currency))])
    }

    static func product(_ p: Product) -> JSON {
        .object([
            ("uid", .string(p.uid)), ("name", .string(p.name)), ("brand", .string(p.brand)),
            ("unit", .string(p.unit)), ("unitSize", .uint32(p.unitSize)), ("price", money(p.price)),
            ("imageUrl", .string(p.imageURL)), ("outOfStock", .bool(p.outOfStock)),
            ("oftenOutOfStock", .bool(p.oftenOutOfStock)), ("shelfUid", .string(p.shelfUID)),
        ])
    }

    static func shelf(_ s: Shelf) -> JSON {
        .object([("uid", .string(s.uid)), ("name", .string(s.name)), ("productCount", .uint32(s.productCount)),
                 ("products", .array(s.products.map(product)))])
    }

    static func department(_ d: Department) -> JSON {
        .object([("uid", .string(d.uid)), ("name", .string(d.name)), ("shelves", .array(d.shelves.map(shelf)))])
    }

    static func storeSummary(_ s: StoreSummary) -> JSON {
        .object([("uid", .string(s.uid)), ("name", .string(s.name)), ("chain", .string(s.chain)),
                 ("address", .string(s.address)), ("cityUid", .string(s.cityUID))])
    }

    static func store(_ s: Store) -> JSON {
        .object([("summary", storeSummary(s.summary)), ("departments", .array(s.departments.map(department)))])
    }

    static func city(_ c: City) -> JSON {
        .object([("uid", .string(c.uid)), ("code", .string(c.code)), ("name", .string(c.name)),
                 ("stores", .array(c.stores.map(storeSummary))), ("defaultStoreUid", .string(c.defaultStoreUID))])
    }

    static func cityList(_ v: CityList) -> JSON {
        .object([("cities", .array(v.cities.map(city))), ("catalogVersion", .uint64(v.catalogVersion))])
    }

    static func storeCatalog(_ v: StoreCatalog) -> JSON {
        .object([("store", store(v.store)), ("city", city(v.city)), ("catalogVersion", .uint64(v.catalogVersion)),
                 ("storeVersion", .uint64(v.storeVersion))])
    }

    static func shelfContents(_ v: ShelfContents) -> JSON {
        .object([("shelf", shelf(v.shelf)), ("storeUid", .string(v.storeUID)),
                 ("departmentUid", .string(v.departmentUID)), ("catalogVersion", .uint64(v.catalogVersion)),
                 ("storeVersion", .uint64(v.storeVersion))])
    }

    static func cartLine(_ l: CartLine) -> JSON {
        var fields: [(String, JSON)] = [
            ("productUid", .string(l.productUID)), ("name", .string(l.name)), ("unitPrice", money(l.unitPrice)),
            ("quantity", .uint32(l.quantity)), ("lineTotal", money(l.lineTotal)), ("priceChanged", .bool(l.priceChanged)),
        ]
        if let previous = l.previousPrice { fields.append(("previousPrice", money(previous))) }
        fields.append(("outOfStock", .bool(l.outOfStock)))
        return .object(fields)
    }

    static func cart(_ c: Cart) -> JSON {
        .object([("storeUid", .string(c.storeUID)), ("lines", .array(c.lines.map(cartLine))),
                 ("subtotal", money(c.subtotal)), ("itemCount", .uint32(c.itemCount)),
                 ("currency", .string(c.currency)), ("version", .uint64(c.version))])
    }

    static func order(_ o: Order) -> JSON {
        .object([
            ("number", .string(o.number)), ("storeUid", .string(o.storeUID)), ("cityCode", .string(o.cityCode)),
            ("lines", .array(o.lines.map { l in
                .object([("productUid", .string(l.productUID)), ("name", .string(l.name)), ("unitPrice", money(l.unitPrice)),
                         ("quantity", .uint32(l.quantity)), ("lineTotal", money(l.lineTotal))])
            })),
            ("total", money(o.total)), ("cardBrand", .string(o.cardBrand)), ("cardLast4", .string(o.cardLast4)),
            ("createdAtUnix", .int64(o.createdAtUnix)), ("deliveryAddress", .string(o.deliveryAddress)),
            ("holderName", .string(o.holderName)),
        ])
    }

    static func serverInfo(_ v: ServerInfo) -> JSON {
        .object([("serverVersion", .string(v.serverVersion)), ("protocolVersion", .uint32(v.protocolVersion)),
                 ("uptimeMs", .uint64(v.uptimeMilliseconds)), ("catalogVersion", .uint64(v.catalogVersion)),
                 ("methods", .array(v.methods.map { .string($0) }))])
    }
}
