import Foundation
import GroserStorage
import Testing

/// The throwaway cluster tools/test starts (tools/pg-cluster), as a libpq
/// conninfo; nil when the tests run without one.
let testPostgres = ProcessInfo.processInfo.environment["GROSER_TEST_PG"]

/// libpq through PostgresConnection, against a real PostgreSQL.
@Suite("PostgreSQL connection", .serialized, .enabled(if: testPostgres != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
struct PostgresConnectionTests {
    let db: PostgresConnection
    let table: String

    init() throws {
        db = try PostgresConnection(testPostgres!)
        table = "t_\(UInt32.random(in: 0...UInt32.max))"
        try db.execute("CREATE TABLE \(table) (id bigint PRIMARY KEY, name text, note text)")
    }

    @Test func parametersRoundTripAsTextWithNullsAndUnicode() throws {
        try db.execute("INSERT INTO \(table) VALUES ($1, $2, $3)", ["1", "Молоко 3,2% 'quoted'; DROP TABLE x", nil])
        let rows = try db.execute("SELECT id, name, note FROM \(table) WHERE id = $1", ["1"])
        #expect(rows.rows.count == 1)
        #expect(rows[0, "name"] == "Молоко 3,2% 'quoted'; DROP TABLE x")
        #expect(rows.rows[0][2] == nil)
        #expect(db.serverVersion >= 140000, "pipeline mode needs PostgreSQL 14 or later")
    }

    @Test func aUniqueViolationIsTypedAndTheConnectionGoesOn() throws {
        try db.execute("INSERT INTO \(table) VALUES (1, 'a', NULL)")
        let error = #expect(throws: PostgresError.self) { try db.execute("INSERT INTO \(table) VALUES (1, 'b', NULL)") }
        #expect(error?.isUniqueViolation == true, "\(String(describing: error))")
        #expect(try db.execute("SELECT count(*) AS n FROM \(table)")[0, "n"] == "1")
    }

    @Test func aBatchIsOneTransaction() throws {
        let inserts = (1...200).map { PostgresStatement("INSERT INTO \(table) VALUES ($1, $2, NULL)", [String($0), "p\($0)"]) }
        let results = try db.batch(inserts + [PostgresStatement("SELECT count(*) AS n FROM \(table)")])
        #expect(results.count == 201 && results[0].affected == 1)
        #expect(results[200][0, "n"] == "200", "the batch sees its own rows")
        // One failing statement: nothing of that batch is applied, and the error names it.
        let bad = [PostgresStatement("INSERT INTO \(table) VALUES (1000, 'x', NULL)"),
                   PostgresStatement("INSERT INTO \(table) VALUES (5, 'duplicate', NULL)"),
                   PostgresStatement("INSERT INTO \(table) VALUES (1001, 'y', NULL)")]
        let error = #expect(throws: PostgresError.self) { try db.batch(bad) }
        #expect(error?.isUniqueViolation == true && error?.statement == 1, "\(String(describing: error))")
        #expect(try db.execute("SELECT count(*) AS n FROM \(table) WHERE id >= 1000")[0, "n"] == "0")
        // And the connection is usable again, in and out of pipeline mode.
        #expect(try db.batch([PostgresStatement("INSERT INTO \(table) VALUES (1002, 'z', NULL)")]).count == 1)
        #expect(try db.execute("SELECT count(*) AS n FROM \(table)")[0, "n"] == "201")
    }

    @Test func aConnectionThatCannotBeMadeSaysWhy() {
        let error = #expect(throws: PostgresError.self) { try PostgresConnection("host=/nonexistent-groser port=1 dbname=x connect_timeout=2") }
        #expect(error?.message.contains("cannot connect to PostgreSQL") == true && error?.isConnectionFailure == true)
    }
}
