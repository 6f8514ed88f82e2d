import GroserWire

/// The checks a catalog import makes of each record that need the data
/// (docs/CATALOG.md §7), written once for both stores: a uid comes once in
/// the file; a parent comes before its children, in the file or the
/// catalog; a record the catalog has keeps its owner. Value rules (lengths,
/// characters, units) are the caller's. What the file staged so far and
/// what the catalog holds are asked of a `CatalogImportLookup`: SQLite's
/// reads its staging file and the live database, PostgreSQL's its
/// in-memory maps and a batch read of the live catalog.
enum CatalogImportValidator {
    /// The kinds of catalog record, by the name the messages give them.
    enum Kind: String, Sendable {
        case city, store, department, shelf, product

        /// The kind of the record's parent; nil for a city.
        var parent: Kind? {
            switch self {
            case .city: nil
            case .store: .city
            case .department: .store
            case .shelf: .department
            case .product: .shelf
            }
        }
    }

    /// Checks `r` against `lookup`: the first rule it breaks is thrown with
    /// `r`'s line, as is a lookup's failure ("the import could not be
    /// staged: …"). Returns the record's owner: a store's city, the store of
    /// a department, shelf or product; nil for a city.
    static func check<L: CatalogImportLookup>(_ r: NumberedRecord, _ lookup: L) throws(ImportProblem) -> String? {
        let verdict: Verdict
        do { verdict = try self.verdict(r.record, lookup) } catch {
            throw ImportProblem(line: r.line, "the import could not be staged: \(error)")
        }
        switch verdict {
        case .accepted(let owner): return owner
        case .refused(let reason): throw ImportProblem(line: r.line, reason)
        }
    }

    private enum Verdict {
        case accepted(owner: String?)
        case refused(String)
    }

    private static func verdict<L: CatalogImportLookup>(_ record: CatalogRecord, _ lookup: L) throws(L.Failure) -> Verdict {
        let (kind, uid, parentUID) = identity(record)
        if let first = try lookup.lineInFile(kind, uid) {
            return .refused("\(kind.rawValue) uid \(uid) is already on line \(first)")
        }
        guard let parent = kind.parent else { return .accepted(owner: nil) }
        // A store's owner is its city and a department's its store, once
        // they exist; a shelf and a product belong to their parent's store.
        let owner: String?
        switch kind {
        case .store, .department: owner = try lookup.exists(parent, parentUID) ? parentUID : nil
        default: owner = try lookup.store(of: parent, parentUID)
        }
        guard let owner else {
            return .refused("\(kind.rawValue) \(uid): \(parent.rawValue)_uid \(parentUID) names no \(parent.rawValue) in the file so far or the catalog; parents must come before their children")
        }
        if let before = try lookup.ownerInCatalog(kind, uid), before != owner {
            return .refused(moved(kind, uid, from: before))
        }
        return .accepted(owner: owner)
    }

    /// The record's kind, uid and its parent's uid ("" for a city).
    private static func identity(_ record: CatalogRecord) -> (Kind, String, String) {
        switch record {
        case .city(let c): (.city, c.uid, "")
        case .store(let s): (.store, s.uid, s.cityUID)
        case .department(let d): (.department, d.uid, d.storeUID)
        case .shelf(let h): (.shelf, h.uid, h.departmentUID)
        case .product(let p): (.product, p.product.uid, p.product.shelfUID)
        }
    }

    private static func moved(_ kind: Kind, _ uid: String, from owner: String) -> String {
        switch kind {
        case .city: "city \(uid) cannot move"  // a city has no owner: never asked
        case .store: "store \(uid) belongs to \(owner); a store cannot move to another city"
        case .department: "department \(uid) belongs to \(owner); a department cannot move to another store"
        case .shelf: "shelf \(uid) belongs to store \(owner); a shelf cannot move to another store"
        case .product: "product \(uid) is sold by store \(owner); a product cannot move to another store"
        }
    }
}

/// What `CatalogImportValidator` asks of a store: the records the import's
/// file staged so far, and the live catalog's.
protocol CatalogImportLookup {
    associatedtype Failure: Error
    typealias Kind = CatalogImportValidator.Kind

    /// The line of the file's record of `kind` with `uid`, when the file
    /// so far has one.
    func lineInFile(_ kind: Kind, _ uid: String) throws(Failure) -> UInt32?
    /// Whether a city or store `uid` is in the file so far or the catalog.
    func exists(_ kind: Kind, _ uid: String) throws(Failure) -> Bool
    /// The store of department or shelf `uid`, from the file so far or
    /// else the catalog; nil when neither has it.
    func store(of kind: Kind, _ uid: String) throws(Failure) -> String?
    /// The owner the live catalog gives record `uid` of `kind` (a store's
    /// city, the store of a department, shelf or product); nil when the
    /// catalog has no such record.
    func ownerInCatalog(_ kind: Kind, _ uid: String) throws(Failure) -> String?
}
