import GroserWire

/// The value rules of docs/CATALOG.md §4–§5 that one record can be checked
/// against by itself: a pure function, so the daemon refuses a bad record
/// before staging it, whatever client sent it.
public enum CatalogRecordRules {
    /// Why `record` breaks a rule, or nil.
    public static func problem(_ record: CatalogRecord) -> String? {
        switch record {
        case .city(let c):
            return uid("city", c.uid, "uid") ?? code(c) ?? text("city \(c.uid)", "name", c.name)
                ?? uid("city \(c.uid)", c.defaultStoreUID, "default_store_uid")
        case .store(let s):
            return uid("store", s.uid, "uid") ?? uid("store \(s.uid)", s.cityUID, "city_uid")
                ?? text("store \(s.uid)", "name", s.name) ?? text("store \(s.uid)", "chain", s.chain)
                ?? text("store \(s.uid)", "address", s.address, maximum: 1024)
        case .department(let d):
            return uid("department", d.uid, "uid") ?? uid("department \(d.uid)", d.storeUID, "store_uid")
                ?? text("department \(d.uid)", "name", d.name)
        case .shelf(let h):
            return uid("shelf", h.uid, "uid") ?? uid("shelf \(h.uid)", h.departmentUID, "department_uid")
                ?? text("shelf \(h.uid)", "name", h.name)
        case .product(let v):
            let p = v.product
            let who = "product \(p.uid)"
            if let problem = uid("product", p.uid, "uid") ?? uid(who, p.shelfUID, "shelf_uid") ?? text(who, "name", p.name)
                ?? text(who, "brand", p.brand, minimum: 0) { return problem }
            guard ["g", "ml", "pcs"].contains(p.unit) else { return "\(who): unit must be \"g\", \"ml\" or \"pcs\", not \"\(clip(p.unit))\"" }
            guard p.unitSize >= 1 else { return "\(who): unit_size must be at least 1" }
            guard p.price.minorUnits >= 0 else { return "\(who): price.minor_units must not be negative" }
            guard p.price.currency == "RUB" else { return "\(who): price.currency must be \"RUB\" in format 1, not \"\(clip(p.price.currency))\"" }
            if let problem = imageURL(who, p.imageURL) { return problem }
            if !v.barcode.isEmpty, let problem = barcode(who, v.barcode) { return problem }
            return nil
        }
    }

    static func uid(_ who: String, _ value: String, _ field: String) -> String? {
        let bytes = value.utf8
        guard (1...128).contains(bytes.count) else { return "\(who): \(field) must be 1 to 128 bytes, not \(bytes.count)" }
        for b in bytes {
            let ok = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b == 0x2e || b == 0x5f || b == 0x2d
            guard ok else { return "\(who): \(field) \"\(clip(value))\" may hold only A-Z, a-z, 0-9, '.', '_' and '-'" }
        }
        return nil
    }

    static func text(_ who: String, _ field: String, _ value: String, minimum: Int = 1, maximum: Int = 256) -> String? {
        let n = value.utf8.count
        guard n >= minimum && n <= maximum else { return "\(who): \(field) must be \(minimum) to \(maximum) bytes, not \(n)" }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            return "\(who): \(field) holds a control character"
        }
        // Shown to shoppers as it is: a U+202E would show the rest of the
        // line reversed, a zero-width space would make two names look alike.
        if let hidden = value.unicodeScalars.first(where: \.isInvisibleFormatting) {
            let hex = String(hidden.value, radix: 16, uppercase: true)
            return "\(who): \(field) holds U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex), "
                + "an invisible formatting character (bidirectional controls, zero-width characters and the like are refused)"
        }
        guard value.first != " " && value.last != " " else { return "\(who): \(field) begins or ends with a space" }
        return nil
    }

    static func code(_ c: City) -> String? {
        let bytes = c.code.utf8
        guard (2...8).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x41 && $0 <= 0x5a }) else {
            return "city \(c.uid): code \"\(clip(c.code))\" must be 2 to 8 upper-case letters A-Z"
        }
        return nil
    }

    static func imageURL(_ who: String, _ url: String) -> String? {
        let bytes = url.utf8
        guard (1...2048).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7e }) else {
            return "\(who): image_url must be 1 to 2048 bytes of printable ASCII without spaces"
        }
        guard url.hasPrefix("/") || url.hasPrefix("https://") || url.hasPrefix("http://") else {
            return "\(who): image_url must begin with /, https:// or http://"
        }
        return nil
    }

    /// EAN-13: 13 digits, the last the check digit.
    static func barcode(_ who: String, _ code: String) -> String? {
        let digits = code.utf8.map { Int($0) - 0x30 }
        guard digits.count == 13, digits.allSatisfy({ (0...9).contains($0) }) else {
            return "\(who): barcode \"\(clip(code))\" must be 13 digits"
        }
        var sum = 0
        for (i, d) in digits.prefix(12).enumerated() { sum += i % 2 == 0 ? d : 3 * d }
        let check = (10 - sum % 10) % 10
        guard digits[12] == check else { return "\(who): barcode \"\(code)\" has a wrong check digit (\(check) expected)" }
        return nil
    }

    static func clip(_ s: String) -> String { s.count <= 40 ? s : String(s.prefix(40)) + "…" }
}
