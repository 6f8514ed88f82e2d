import GroserStorage
import GroserWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

private func permissions(_ path: String) -> mode_t? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o777
}

/// What the database keeps of customers is readable by groserd's user only,
/// and session tokens are kept as hashes.
@Suite("private storage")
struct PrivateStorageTests {
    @Test func theDatabaseAndItsWALAndSHMFilesAre0600() throws {
        let dir = try TemporaryDirectory()
        // A permissive umask, as a careless service file might leave it.
        let old = umask(0)
        defer { umask(old) }
        let store = try SQLiteCatalogStore(directory: dir.path)
        try store.write { (tx) throws(StorageError) in
            try tx.saveIdempotentAnswer(session: SessionKey(token: "0123456789abcdef0123456789abcdef"), key: "k",
                                        IdempotentAnswer(fingerprint: "f", field: 1, body: [0]))
        }
        for file in SQLiteCatalogStore.files(of: store.path) where fileExists(file) {
            #expect(permissions(file) == 0o600, "\(file) has mode \(String(permissions(file) ?? 0, radix: 8))")
        }
        #expect(fileExists(store.path + "-wal"), "WAL mode keeps a -wal file while open")
    }

    @Test func filesLeftWiderByAnOlderVersionAreNarrowed() throws {
        let dir = try TemporaryDirectory()
        do { _ = try SQLiteCatalogStore(directory: dir.path) }
        let path = dir.file(SQLiteCatalogStore.fileName)
        chmod(path, 0o644)
        _ = try SQLiteCatalogStore(directory: dir.path)
        #expect(permissions(path) == 0o600)
    }

    @Test func aSessionKeyIsAHashThatDiffersFromTheTokenAndByCase() {
        let token = "0123456789abcdef0123456789abcdef"
        let key = SessionKey(token: token)
        #expect(key.hex.count == 64 && key.hex.allSatisfy(\.isHexDigit))
        #expect(!key.hex.contains(token))
        #expect(key == SessionKey(token: token), "the same token always has the same key")
        #expect(key != SessionKey(token: token.uppercased()), "tokens are compared exactly")
        #expect(key.matches(SessionKey(token: token)) && !key.matches(SessionKey(token: token + "0")))
        // BLAKE2b-256 of "abc" (RFC 7693 test vector family; libsodium's generichash).
        #expect(SessionKey(token: "abc").hex == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319")
    }

    @Test(.enabled(if: sqlite3Shell != nil, "needs the sqlite3 shell"))
    func upgradingASchema2DatabaseHashesItsTokensAndKeepsTheirSessions() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file(SQLiteCatalogStore.fileName)
        do { _ = try SQLiteCatalogStore(directory: dir.path) }
        // Turn it back into what groserd wrote before schema 3: raw tokens.
        let token = "fedcba9876543210fedcba9876543210"
        _ = try sqlite3(path, """
            DROP TABLE sessions;
            CREATE TABLE sessions(selector TEXT NOT NULL, token TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
            INSERT INTO sessions VALUES ('fedcba98', '\(token)', 7);
            INSERT INTO carts(session, store_uid, version) VALUES ('\(token)', 'store-spb-1', 3);
            INSERT INTO idempotency VALUES ('\(token)', 'k', 'f', 1, x'00');
            DROP INDEX products_by_change;
            DROP INDEX departments_by_store;
            DROP INDEX shelves_by_department;
            ALTER TABLE products DROP COLUMN changed_version;
            ALTER TABLE products DROP COLUMN barcode;
            PRAGMA user_version = 2;
            """)
        let store = try SQLiteCatalogStore(directory: dir.path)
        let key = SessionKey(token: token)
        // What groserd then moves into the customer log.
        let records = try store.legacyCustomerRecords(nowUnix: 100)
        #expect(records.contains(.session(key, createdAtUnix: 7)), "a session opened before the upgrade still works")
        #expect(records.contains(.cart(key, storeUID: "store-spb-1", StoredCart(version: 3, lines: []), atUnix: 100)),
                "and keeps its cart")
        #expect(records.contains { if case .answer(key, "k", _) = $0 { true } else { false } }, "and its idempotency records")
        let dump = try sqlite3(path, ".dump").joined(separator: "\n")
        #expect(!dump.contains(token), "the raw token is gone from the database")
        #expect(dump.contains(key.hex))
        #expect(try sqlite3(path, "PRAGMA user_version") == ["4"])
    }

    @Test func aDatabaseDeletedWhileOpenTakesNoMoreWrites() throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteCatalogStore(directory: dir.path)
        let key = SessionKey(token: "0123456789abcdef0123456789abcdef")
        let answer = IdempotentAnswer(fingerprint: "f", field: 1, body: [0])
        try store.write { (tx) throws(StorageError) in try tx.saveIdempotentAnswer(session: key, key: "a", answer) }
        for file in SQLiteCatalogStore.files(of: store.path) { unlink(file) }
        let error = #expect(throws: StorageError.self) {
            try store.write { (tx) throws(StorageError) in
                try tx.saveIdempotentAnswer(session: key, key: "b", answer)
            }
        }
        #expect(error?.description.contains("deleted or replaced") == true, "\(String(describing: error))")
        // A new file in its place does not make writes safe again: they would
        // still go to the deleted one.
        _ = try SQLiteCatalogStore(directory: dir.path)
        #expect(throws: StorageError.self) {
            try store.write { (tx) throws(StorageError) in _ = try tx.idempotentAnswer(session: key, key: "a") }
        }
    }
}
