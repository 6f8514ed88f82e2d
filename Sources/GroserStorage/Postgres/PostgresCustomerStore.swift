import GroserSystem

/// A customer store that several groserd share (PostgreSQL): the shard's
/// memory is only a cache of it. Each batch runs in one transaction of the
/// database: `begin` reads (and locks) the sessions the batch names, the
/// shard applies its rules to them, checkouts write orders and stock through
/// `transaction`, and `commit` writes the batch's records and commits. A
/// session that another host changed between the read and the write (a row
/// that appeared, or a revision that moved) makes `commit` throw a conflict:
/// the shard then runs the batch again on what the database holds now.
public protocol SharedCustomerStore: CustomerStore {
    /// Starts the batch's transaction and reads the sessions `keys` name,
    /// with the account entries that own them: each as the database holds
    /// it (nil: no longer stored), with only the remembered answers
    /// `answers` names (session, idempotency key): a session's other
    /// answers are never needed by the batch, and there may be thousands.
    /// `answerCutoff`: answers given before it have expired and are not read.
    func begin(reading keys: [SessionKey], answers: [(SessionKey, String)], answerCutoff: Int64) throws(StorageError)
        -> [SessionKey: SessionState?]
    /// The open transaction, for checkout's orders and stock.
    var transaction: any CommerceTransaction { get }
    /// Writes `records` (the sessions they name as `state` now holds them)
    /// and commits. Throws a StorageError that `isConflict` when another host
    /// changed one of the sessions since `begin`; nothing is written then.
    func commit(_ records: [CustomerRecord], state: borrowing CustomerState, answerCutoff: Int64) throws(StorageError)
    /// Ends the transaction without writing (after a failure).
    func rollback()
    /// What the next checkpoint removes: guest sessions last active before
    /// `idleBefore`, answers given before `answersBefore`.
    func setExpiry(idleBefore: Int64, answersBefore: Int64)
}

/// One shard's customer state in PostgreSQL. Sessions are rows of
/// `customer_sessions` (the session's records, without its answers, in the
/// customer log's encoding, and a revision every write moves); remembered
/// answers are rows of `customer_answers`, whose primary key (session,
/// idempotency key) makes a key's answer unique across hosts by a
/// constraint. Used by the shard's thread only, except `checkpoint`, which
/// runs on the compactor's thread with a connection of its own.
public final class PostgresCustomerStore: SharedCustomerStore, @unchecked Sendable {
    // @unchecked: `connection` and `revisions` belong to the shard's thread.
    public let conninfo: String
    private var connection: PostgresConnection?
    /// The revision of each session row `begin` read (0: no row).
    private var revisions: [SessionKey: Int64] = [:]
    private var appendsSinceCheckpoint = 0
    /// Appends between two checkpoints (which expire idle sessions and old answers).
    static let appendsPerCheckpoint = 10_000

    /// `conninfo` with PostgresCatalogStore's connection defaults (timeouts).
    private let connectInfo: String
    /// Told of the round trips (each batch's `begin` pipeline is timed),
    /// failures and reconnects, for Stats.
    let health: StoreHealth
    /// A connection was made once: the next one made is a reconnect.
    private var connectedBefore = false

    public init(conninfo: String, health: StoreHealth = StoreHealth(.postgresql)) {
        self.conninfo = conninfo
        self.health = health
        connectInfo = PostgresCatalogStore.withConnectionDefaults(conninfo)
    }

    /// The schema step that creates the customer tables (PostgresSchema's step 2).
    public static let schema = """
        CREATE TABLE customer_sessions(
            key bytea PRIMARY KEY,
            revision bigint NOT NULL CHECK (revision > 0),
            owner bytea,
            is_account boolean NOT NULL,
            last_active bigint NOT NULL,
            state bytea NOT NULL);
        CREATE INDEX customer_sessions_by_owner ON customer_sessions(owner) WHERE owner IS NOT NULL;
        CREATE INDEX customer_sessions_by_activity ON customer_sessions(last_active) WHERE NOT is_account;
        CREATE TABLE customer_answers(
            key bytea NOT NULL,
            name text NOT NULL,
            at_unix bigint NOT NULL,
            fingerprint text NOT NULL,
            field integer NOT NULL,
            body bytea NOT NULL,
            PRIMARY KEY(key, name));
        CREATE INDEX customer_answers_by_age ON customer_answers(at_unix);
        CREATE FUNCTION groser_put_session(k bytea, expected bigint, o bytea, acct boolean, active bigint, st bytea)
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            IF expected = 0 THEN
                INSERT INTO customer_sessions VALUES (k, 1, o, acct, active, st)
                ON CONFLICT (key) DO NOTHING;
            ELSE
                UPDATE customer_sessions SET revision = expected + 1, owner = o, is_account = acct,
                       last_active = active, state = st
                WHERE key = k AND revision = expected;
            END IF;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'groser: the session was changed by another groserd' USING ERRCODE = '40001';
            END IF;
        END $$;
        CREATE FUNCTION groser_remove_session(k bytea, expected bigint) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM customer_sessions WHERE key = k AND revision = expected;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'groser: the session was changed by another groserd' USING ERRCODE = '40001';
            END IF;
            DELETE FROM customer_answers WHERE key = k;
        END $$;
        """

    /// The schema step that keeps the secret session tokens are made with
    /// (PostgresSchema's step 3): one for every groserd on the database, so
    /// a token one host issued is good on another before anything stored it.
    public static let secretsSchema = """
        CREATE TABLE groser_secrets(name text PRIMARY KEY, value bytea NOT NULL);
        """

    /// The session tokens' secret (`bytes` long), made by the first host
    /// that asks and read by the others.
    public static func sessionSecret(conninfo: String, bytes: Int) throws(StorageError) -> [UInt8] {
        let made: [UInt8]
        do { made = try KernelRandom.bytes(bytes) } catch { throw StorageError("cannot make a session secret: \(error)") }
        let rows: [PostgresRows]
        do throws(PostgresError) {
            let c = try PostgresConnection(PostgresCatalogStore.withConnectionDefaults(conninfo))
            defer { c.close() }
            rows = try c.batch([
                PostgresStatement("INSERT INTO groser_secrets VALUES ('session', $1) ON CONFLICT (name) DO NOTHING",
                                  [PostgresText.bytea(made)]),
                PostgresStatement("SELECT value FROM groser_secrets WHERE name = 'session'"),
            ])
        } catch {
            throw StorageError("cannot read the session secret from PostgreSQL: \(error.message)", kind: error.isConnectionFailure ? .unavailable : .failed)
        }
        guard let text = rows[1][0, "value"], let stored = PostgresText.bytes(fromBytea: text), stored.count == bytes else {
            throw StorageError("the session secret in PostgreSQL (groser_secrets) is not \(bytes) bytes")
        }
        return stored
    }

    private func live() throws(StorageError) -> PostgresConnection {
        if let connection { return connection }
        do {
            let c = try PostgresConnection(connectInfo)
            connection = c
            if connectedBefore { health.reconnected() }
            connectedBefore = true
            health.succeeded()
            return c
        } catch {
            health.failed(error.message)
            throw StorageError("PostgreSQL is unavailable: \(error.message)", kind: .unavailable)
        }
    }

    /// Maps a PostgreSQL error: a conflict with another host's write, or the
    /// store being unavailable (the connection is dropped, to be made again).
    /// A connection failure is told to `health`; an error PostgreSQL
    /// answered is a round trip that succeeded.
    private func storageError(_ error: PostgresError) -> StorageError {
        switch error.sqlState {
        // 25P02: a statement of the batch's transaction failed before (a
        // deadlock in a checkout's product read): the batch is run again.
        case "40001", "40P01", "23505", "25P02":
            health.succeeded()
            return StorageError("conflict: \(error.message)", kind: .conflict)
        default:
            if error.isConnectionFailure {
                connection?.close()
                connection = nil
                health.failed(error.message)
                return StorageError("PostgreSQL is unavailable: \(error.message)", kind: .unavailable)
            }
            health.succeeded()
            return StorageError("PostgreSQL refused a customer write: \(error.description)")
        }
    }

    // MARK: CustomerStore

    public func load(into state: inout CustomerState) throws(StorageError) -> String {
        _ = try live()
        return "customer state in PostgreSQL (\(Self.describe(conninfo))): sessions are read as requests name them"
    }

    /// Memory is a cache here: outside a batch's transaction nothing is written.
    public func append(_ records: [CustomerRecord]) throws(StorageError) {
        throw StorageError("the PostgreSQL customer store writes only in a batch's transaction")
    }

    public func checkpointDue() throws(StorageError) -> Bool {
        guard appendsSinceCheckpoint >= Self.appendsPerCheckpoint else { return false }
        appendsSinceCheckpoint = 0
        return true
    }

    /// Removes guest sessions idle for longer than the shard's lifetime and
    /// answers past theirs, for every host at once (whichever runs it).
    /// `expire` is the log's rule and is not used: the limits come from
    /// `lifetimes` given at the last `begin`.
    public func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int {
        guard let (idleCutoff, answerCutoff) = cutoffs.withLock({ $0 }) else { return 0 }
        do {
            let c = try PostgresConnection(connectInfo)
            defer { c.close() }
            let r = try c.batch([
                PostgresStatement("DELETE FROM customer_answers WHERE at_unix < $1", [String(answerCutoff)]),
                PostgresStatement("""
                    DELETE FROM customer_answers WHERE key IN (
                        SELECT key FROM customer_sessions WHERE NOT is_account AND last_active < $1)
                    """, [String(idleCutoff)]),
                PostgresStatement("DELETE FROM customer_sessions WHERE NOT is_account AND last_active < $1", [String(idleCutoff)]),
                PostgresStatement("SELECT count(*) AS n FROM customer_sessions"),
            ])
            health.succeeded()
            return Int(r[3][0, "n"] ?? "") ?? 0
        } catch {
            if error.isConnectionFailure { health.failed(error.message) } else { health.succeeded() }
            throw StorageError("PostgreSQL is unavailable: \(error.message)", kind: .unavailable)
        }
    }

    /// The expiry limits the next checkpoint applies (set by the shard).
    private let cutoffs = Locked<(idle: Int64, answers: Int64)?>(nil)
    public func setExpiry(idleBefore: Int64, answersBefore: Int64) {
        cutoffs.withLock { $0 = (idleBefore, answersBefore) }
    }

    // MARK: SharedCustomerStore

    public func begin(reading keys: [SessionKey], answers: [(SessionKey, String)], answerCutoff: Int64) throws(StorageError)
        -> [SessionKey: SessionState?] {
        let reused = connection != nil
        let c = try live()
        revisions.removeAll(keepingCapacity: true)
        let list = "{" + keys.map(\.hex).joined(separator: ",") + "}"
        // The sessions named and the accounts owning them, locked until the
        // commit: another host's batch on the same session waits for this one.
        let wanted = """
            WITH named AS (SELECT decode(h, 'hex') AS key FROM unnest($1::text[]) AS h),
                 wanted AS (SELECT key FROM named
                            UNION SELECT s.owner FROM customer_sessions s JOIN named USING (key) WHERE s.owner IS NOT NULL)
            """
        let rows: [PostgresRows]
        var started = monotonicNanoseconds()
        let statements = [
                PostgresStatement("BEGIN"),
                PostgresStatement(wanted + """
                    SELECT encode(key, 'hex') AS key, revision, state FROM customer_sessions
                    WHERE key IN (SELECT key FROM wanted) ORDER BY key FOR UPDATE
                    """, [list]),
                PostgresStatement("""
                    SELECT encode(a.key, 'hex') AS key, a.name, a.at_unix, a.fingerprint, a.field, a.body
                    FROM customer_answers a
                    JOIN unnest($1::text[], $2::text[]) AS wanted(k, n) ON a.key = decode(wanted.k, 'hex') AND a.name = wanted.n
                    WHERE a.at_unix >= $3
                    """, [PostgresText.array(answers.map { $0.0.hex }), PostgresText.array(answers.map { $0.1 }),
                          String(answerCutoff)]),
        ]
        do throws(PostgresError) {
            rows = try c.batch(statements)
        } catch {
            guard error.isConnectionFailure, reused else {
                rollback()
                throw storageError(error)
            }
            // A connection PostgreSQL dropped while idle (a restart): nothing
            // of the batch ran, so one new connection may try it.
            connection?.close()
            connection = nil
            let fresh = try live()
            started = monotonicNanoseconds()
            do throws(PostgresError) {
                rows = try fresh.batch(statements)
            } catch {
                rollback()
                throw storageError(error)
            }
        }
        // One pipeline (BEGIN and the two reads), one round trip: Stats' store_round_trip.
        health.roundTrip(nanoseconds: monotonicNanoseconds() &- started)
        var found: [SessionKey: SessionState?] = [:]
        for k in keys { found[k] = .some(nil) }
        var state = CustomerState()
        for row in rows[1].rows {
            guard let hex = row[0], let revision = row[1].flatMap({ Int64($0) }), let blob = row[2] else { continue }
            let key = SessionKey(storedHex: hex)
            revisions[key] = revision
            guard let bytes = PostgresText.bytes(fromBytea: blob), Self.decodeRecords(bytes, into: &state) else {
                rollback()
                throw StorageError("the stored state of \(key) in PostgreSQL is damaged")
            }
        }
        for row in rows[2].rows {
            guard let hex = row[0], let name = row[1], let at = row[2].flatMap({ Int64($0) }), let print = row[3],
                  let field = row[4].flatMap({ UInt32($0) }), let body = row[5].flatMap(PostgresText.bytes(fromBytea:)) else { continue }
            let key = SessionKey(storedHex: hex)
            state.sessions[key]?.answers[name] = StoredAnswer(IdempotentAnswer(fingerprint: print, field: field, body: body), atUnix: at)
        }
        for (key, session) in state.sessions { found[key] = .some(session) }
        return found
    }

    public var transaction: any CommerceTransaction {
        PostgresCommerceTransaction(connection: connection!)
    }

    public func commit(_ records: [CustomerRecord], state: borrowing CustomerState, answerCutoff: Int64) throws(StorageError) {
        let c = try live()
        var statements: [PostgresStatement] = []
        // The sessions the records name, each written once with its state
        // after the whole batch; answers are rows of their own.
        var written: Set<SessionKey> = []
        for record in records {
            switch record {
            case .answer(let key, let name, let a):
                let k = PostgresText.bytea(key)
                statements.append(PostgresStatement("DELETE FROM customer_answers WHERE key = $1 AND name = $2 AND at_unix < $3",
                                                    [k, name, String(answerCutoff)]))
                statements.append(PostgresStatement("INSERT INTO customer_answers VALUES ($1, $2, $3, $4, $5, $6)",
                                                    [k, name, String(a.atUnix), a.answer.fingerprint, String(a.answer.field),
                                                     PostgresText.bytea(a.answer.body)]))
            default:
                // Each session the batch changed, written once (an answer is its own row).
                let key = record.key
                guard written.insert(key).inserted else { continue }
                let expected = revisions[key] ?? 0
                if let session = state.sessions[key] {
                    statements.append(PostgresStatement("SELECT groser_put_session($1, $2, $3, $4, $5, $6)", [
                        PostgresText.bytea(key), String(expected), session.owner.map(PostgresText.bytea),
                        session.account != nil ? "true" : "false", String(session.lastActiveUnix),
                        PostgresText.bytea(Self.encodeRecords(key, session)),
                    ]))
                } else if expected != 0 {
                    statements.append(PostgresStatement("SELECT groser_remove_session($1, $2)", [PostgresText.bytea(key), String(expected)]))
                }
            }
        }
        statements.append(PostgresStatement("COMMIT"))
        do {
            _ = try c.batch(statements)
        } catch {
            rollback()
            throw storageError(error)
        }
        health.succeeded()
        for key in written { revisions[key] = (revisions[key] ?? 0) + 1 }
        appendsSinceCheckpoint += 1
    }

    public func rollback() {
        guard let connection else { return }
        do { try connection.execute("ROLLBACK") } catch {
            if error.isConnectionFailure {
                connection.close()
                self.connection = nil
                health.failed(error.message)
            }
        }
    }

    // MARK: Encoding

    /// A session's records (without its answers), each a u32 length and the
    /// customer log's encoding.
    static func encodeRecords(_ key: SessionKey, _ session: SessionState) -> [UInt8] {
        var one = CustomerState()
        var s = session
        s.answers = [:]
        one.sessions[key] = s
        var out: [UInt8] = []
        var record: [UInt8] = []
        one.forEachRecord { r in
            record.removeAll(keepingCapacity: true)
            CustomerRecordCodec.encode(r, to: &record)
            withUnsafeBytes(of: UInt32(record.count).littleEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: record)
        }
        return out
    }

    static func decodeRecords(_ bytes: [UInt8], into state: inout CustomerState) -> Bool {
        bytes.withUnsafeBytes { p in
            var at = 0
            while at < p.count {
                guard p.count - at >= 4 else { return false }
                let n = Int(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
                at += 4
                guard n <= p.count - at, let r = CustomerRecordCodec.decode(UnsafeRawBufferPointer(rebasing: p[at..<at + n])) else {
                    return false
                }
                state.apply(r)
                at += n
            }
            return true
        }
    }

    /// The conninfo without a password, for the log.
    public static func describe(_ conninfo: String) -> String {
        for scheme in ["postgres://", "postgresql://"] where conninfo.hasPrefix(scheme) {
            // postgres://user:password@host/db: the password goes.
            let rest = conninfo.dropFirst(scheme.count)
            guard let at = rest.firstIndex(of: "@") else { return conninfo }
            let user = rest[..<at].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            return scheme + user + rest[at...]
        }
        return conninfo.split(separator: " ").filter { !$0.hasPrefix("password=") }.joined(separator: " ")
    }
}
