import GroserWire

/// A store that takes catalog imports and gives exports (docs/CATALOG.md
/// §7, §8): SQLite's, and PostgreSQL's shared one.
public protocol CatalogImporting: Sendable {
    /// Opens import `id`, staged apart from the live catalog until its
    /// commit. With `replace`, what a covered store has and the file does
    /// not name is removed at the commit.
    func beginImport(id: UInt64, replace: Bool) throws(StorageError) -> any CatalogImportSession

    /// Up to `limit` records of the catalog (or of one store, with its
    /// city) in the canonical order, from `cursor`; the cursor of the next
    /// page, or nil after the last. Throws when the catalog changed since
    /// `cursor`, and "no store has the uid …" for an unknown store.
    func exportPage(storeUID: String, from cursor: ExportCursor?, limit: Int)
        throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64)
}

/// Where an export page starts: indexes into the canonical order
/// (docs/CATALOG.md §8) and the catalog version it was made at.
public struct ExportCursor: Sendable, Hashable {
    public var version: UInt64
    /// Index of the next record among all the canonical records.
    public var record: Int
    public init(version: UInt64, record: Int) {
        self.version = version
        self.record = record
    }
}

/// Why an import record was refused: its line and one readable sentence.
public struct ImportProblem: Error, Sendable, CustomStringConvertible {
    public var line: UInt32
    public var reason: String
    public init(line: UInt32, _ reason: String) {
        self.line = line
        self.reason = reason
    }
    public var description: String { line > 0 ? "line \(line): \(reason)" : reason }
}

/// What a committed import did.
public struct ImportSummary: Sendable, Hashable {
    public var catalogVersion: UInt64
    public var stores: Int
    public var products: Int
    public var removed: Int
}

/// One open import: records are checked as they arrive and staged; the
/// live catalog changes only at `commit`, in one transaction. A refused
/// record, a `discard` or a failed commit leaves the catalog as it was.
/// Used by one thread at a time.
public protocol CatalogImportSession: AnyObject {
    var id: UInt64 { get }
    var replace: Bool { get }
    /// Records staged so far.
    var records: UInt64 { get }

    /// Stages `records` in order; the first refused one is thrown with its
    /// line (those before it are staged).
    func add(_ records: [NumberedRecord]) throws(ImportProblem)

    /// Applies every staged record and ends the import.
    func commit() throws(ImportProblem) -> ImportSummary

    /// Ends the import without applying it; safe to call more than once.
    func discard()
}

extension SQLiteCatalogStore: CatalogImporting {
    public func beginImport(id: UInt64, replace: Bool) throws(StorageError) -> any CatalogImportSession {
        try SQLiteCatalogImport(store: self, id: id, replace: replace)
    }
}

extension SQLiteCatalogImport: CatalogImportSession {
    public func add(_ records: [NumberedRecord]) throws(ImportProblem) {
        for r in records { try add(r) }
    }
}
