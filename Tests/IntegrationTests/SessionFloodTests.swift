import Foundation
import GroserClient
import GroserStorage
import GroserSystem
import Testing

/// Issue 32 §3: an OpenSession flood costs groserd no memory and no log. A
/// session is stored at its first change; OpenSession is limited per peer
/// uid; a cap on stored sessions refuses the change that would store one more.
@Suite("sessions without bound", .serialized)
struct SessionFloodTests {
    /// Sessions the customer log of `daemon` holds, read as a restart would.
    func loggedSessions(_ daemon: Daemon) throws -> Int {
        let root = daemon.dataDirectory + "/customers"
        var n = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: root) where name.hasPrefix("shard-") {
            var state = CustomerState()
            try CustomerLog.read(directory: root + "/" + name, into: &state)
            n += state.sessions.count
        }
        return n
    }

    func residentKilobytes(_ daemon: Daemon) throws -> Int {
        try #require(ProcessInfo.residentKilobytes(pid: daemon.process.processIdentifier))
    }

    /// `count` OpenSession requests pipelined on one connection, in rounds
    /// of 500; the tokens answered.
    func openSessions(_ daemon: Daemon, _ count: Int) throws -> [String] {
        let c = try RawConnection(path: daemon.socketPath)
        var tokens: [String] = []
        var sent = 0
        while sent < count {
            let round = min(500, count - sent)
            var bytes: [UInt8] = []
            for i in 0..<round { bytes += Framing.frame(Request(id: UInt64(sent + i + 1), method: .openSession).encoded()) }
            try c.send(bytes)
            for _ in 0..<round {
                let r = try #require(try c.receive())
                guard case .openSession(let token) = r.body else { throw TestFailure("OpenSession answered \(r.status)") }
                tokens.append(token)
            }
            sent += round
        }
        return tokens
    }

    @Test func anOpenSessionFloodStoresNothingAndKeepsMemoryFlat() throws {
        let daemon = try Daemon(extraArguments: ["--session-open-rate", "0"])
        let client = daemon.client(timeout: 10)
        _ = try openSessions(daemon, 1000)
        let before = try residentKilobytes(daemon)
        let results = Locked<[Result<[String], any Error>]>([])
        let threads = (0..<2).map { _ in
            Thread {
                let r = Result { try openSessions(daemon, 10_000) }
                results.withLock { $0.append(r) }
            }
        }
        for t in threads { t.start() }
        #expect(eventually(seconds: TestTime.seconds(60)) { results.withLock { $0.count } == 2 })
        let tokens = try results.withLock { $0 }.flatMap { try $0.get() }
        #expect(Set(tokens).count == 20_000, "every token differs")
        // Before the fix, 20,000 stored sessions took about 7 MiB (and the log 1 MB).
        // (Under a sanitizer, its shadow memory and quarantine make RSS meaningless.)
        if ProcessInfo.processInfo.environment["GROSER_SANITIZER"] == nil {
            let after = try residentKilobytes(daemon)
            #expect(after - before < 5 * 1024, "RSS \(before) KiB → \(after) KiB after 20,000 OpenSession")
        }
        #expect(try loggedSessions(daemon) == 0, "OpenSession writes nothing to the customer log")
        // The tokens are good all the same.
        let store = try client.store(.cityCode("SPB")).store.uid
        #expect(try client.cart(session: tokens[12_345], storeUID: store).lines.isEmpty)
    }

    @Test func aTokenIsStoredAtItsFirstChangeAndSurvivesRestarts() throws {
        let daemon = try Daemon()
        let client = daemon.client(timeout: 10)
        let spb = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(spb.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let a = try client.openSession(), b = try client.openSession()
        #expect(a.count == 64 && a.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }, "\(a)")
        #expect(try client.cart(session: a, storeUID: spb.uid).lines.isEmpty)
        #expect(try client.whoAmI(session: a).account == nil)
        #expect(try client.orders(session: a).isEmpty)
        #expect(try loggedSessions(daemon) == 0, "reads store nothing")
        _ = try client.addItem(CartMutation(session: a, storeUID: spb.uid), productUID: product.uid, quantity: 2)
        #expect(try loggedSessions(daemon) == 1, "the first change stores the session")
        #expect(daemon.terminate() == 0)
        try daemon.start()
        #expect(try client.cart(session: a, storeUID: spb.uid).lines.map(\.quantity) == [2], "a stored session survives a restart")
        #expect(try client.cart(session: b, storeUID: spb.uid).lines.isEmpty, "an unstored token too: the secret is kept")
        let mode = try Files.mode(daemon.dataDirectory + "/customers/session-secret")
        #expect(mode & 0o777 == 0o600, "the secret is 0600, not \(String(mode, radix: 8))")
        // A token with its MAC changed, or made up, is no session.
        let last = b.last == "0" ? "1" : "0"
        for forged in [String(b.dropLast()) + last, String(repeating: "a", count: 64), b.uppercased()] {
            expectStatus(.unauthenticated, containing: "unknown") { _ = try client.cart(session: forged, storeUID: spb.uid) }
            expectStatus(.unauthenticated, containing: "unknown") {
                _ = try client.addItem(CartMutation(session: forged, storeUID: spb.uid), productUID: product.uid)
            }
        }
        // A refused first change stores nothing.
        expectStatus(.invalidArgument, containing: "nope") {
            _ = try client.addItem(CartMutation(session: b, storeUID: spb.uid), productUID: "nope")
        }
        #expect(try loggedSessions(daemon) == 1)
    }

    /// Python that reads answers: `answer(s)` is the next frame's status
    /// code and message on the socket `s`.
    static let pythonAnswers = #"""
        import socket, struct, sys
        buf = b""
        def read_varint(b, i):
            v = shift = 0
            while True:
                v |= (b[i] & 0x7F) << shift; i += 1; shift += 7
                if not b[i - 1] & 0x80: return v, i
        def answer(s):
            global buf
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
                buf += s.recv(65536)
            size = struct.unpack(">I", buf[:4])[0]
            body, buf = buf[4:4 + size], buf[4 + size:]
            code, message, i = 0, "", 0
            while i < len(body):
                key, i = read_varint(body, i)
                if key & 7 == 0: _, i = read_varint(body, i); continue
                length, i = read_varint(body, i)
                if key >> 3 == 2:
                    inner, j = body[i:i + length], 0
                    while j < len(inner):
                        k, j = read_varint(inner, j)
                        if k & 7 == 0: code, j = read_varint(inner, j)
                        else:
                            m, j = read_varint(inner, j); message = inner[j:j + m].decode(); j += m
                i += length
            return code, message

        """#

    /// A Python client that sends `argv[2]` OpenSession requests at once on
    /// the socket `argv[1]` and prints each answer's status code and message.
    static let pythonOpener = pythonAnswers + #"""
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        n = int(sys.argv[2])
        s.sendall(b"".join(struct.pack(">I", 4) + bytes([8, i + 1, 0x72, 0]) for i in range(n)))
        for _ in range(n):
            print(*answer(s))
        """#

    @Test func openSessionIsLimitedPerPeerUid() throws {
        try Privileged.requireOtherUsers()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        let daemon = try Daemon(directory: dir, extraArguments: ["--socket-group", "nogroup",
                                                                 "--session-open-rate", "1", "--session-open-burst", "5"])
        func openAsNobody(_ n: Int) throws -> [Substring] {
            let r = try runProgram("/usr/bin/python3", ["-c", Self.pythonOpener, daemon.socketPath, String(n)],
                                   environment: minimalEnvironment(), as: 65534)
            #expect(r.status == 0, "\(r.err)")
            return r.out.split(separator: "\n")
        }
        // The burst, then refusals (a refill of one a second may let one more through).
        let answers = try openAsNobody(8)
        let opened = answers.filter { $0.hasPrefix("0 ") }.count
        #expect(opened >= 5 && opened <= 6, "\(answers)")
        #expect(answers.contains { $0.hasPrefix("8 ") && $0.contains("--session-open-rate") }, "RESOURCE_EXHAUSTED: \(answers)")
        // groserd's own uid (root here) is not limited, nor held back by nobody's bucket.
        for _ in 0..<20 { _ = try daemon.client().openSession() }
        #expect(eventually { (try? openAsNobody(1))?.first?.hasPrefix("0 ") == true }, "nobody's bucket refills")
    }

    @Test func theCapOnStoredSessionsRefusesTheChangeThatWouldStoreOneMore() throws {
        let daemon = try Daemon(extraArguments: ["--max-sessions", "2", "--customer-shards", "1"])
        let client = daemon.client(timeout: 10)
        let spb = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(spb.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let tokens = try (0..<3).map { _ in try client.openSession() }
        for t in tokens.prefix(2) {
            _ = try client.addItem(CartMutation(session: t, storeUID: spb.uid), productUID: product.uid)
        }
        expectStatus(.resourceExhausted, containing: "--max-sessions") {
            _ = try client.addItem(CartMutation(session: tokens[2], storeUID: spb.uid), productUID: product.uid)
        }
        #expect(try client.cart(session: tokens[2], storeUID: spb.uid).lines.isEmpty, "the unstored session still reads")
        #expect(try client.addItem(CartMutation(session: tokens[0], storeUID: spb.uid), productUID: product.uid).lines.count == 1,
                "stored sessions still change")
        #expect(try loggedSessions(daemon) == 2)
    }

    /// A Python client that sends, on the socket `argv[1]`, one AddItem of
    /// product `argv[3]` in store `argv[2]` for each session token after
    /// them, and prints each answer's status code and message.
    static let pythonAdder = pythonAnswers + #"""
        def varint(n):
            out = b""
            while True:
                b = n & 0x7F; n >>= 7
                if n: out += bytes([b | 0x80])
                else: return out + bytes([b])
        def field(number, data): return varint(number << 3 | 2) + varint(len(data)) + data
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        store, product = sys.argv[2].encode(), sys.argv[3].encode()
        for n, token in enumerate(sys.argv[4:]):
            cart = field(1, token.encode()) + field(2, store)
            body = bytes([8]) + varint(n + 1) + field(16, field(1, cart) + field(2, product) + bytes([0x18, 1]))
            s.sendall(struct.pack(">I", len(body)) + body)
            print(*answer(s))
        """#

    /// One uid storing session after session (a first change on each token)
    /// could fill `--max-sessions` and lock everyone out of carts and logins.
    /// Now a uid stores at most its share (an eighth of the cap at once, a
    /// quarter within a session lifetime); others, and logins, go on.
    @Test func oneUidCannotStoreMoreThanItsShareOfSessions() throws {
        try Privileged.requireOtherUsers()
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        // 80 sessions: a share of 10 per uid.
        let daemon = try Daemon(directory: dir, extraArguments: ["--socket-group", "nogroup", "--max-sessions", "80",
                                                                 "--customer-shards", "1"])
        let client = daemon.client(timeout: 10)
        let spb = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(spb.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        // Tokens from root (not limited); nobody makes the first change on each.
        let tokens = try (0..<12).map { _ in try client.openSession() }
        let r = try runProgram("/usr/bin/python3", ["-c", Self.pythonAdder, daemon.socketPath, spb.uid, product.uid] + tokens,
                               environment: minimalEnvironment(), as: 65534)
        #expect(r.status == 0, "\(r.err)")
        let answers = r.out.split(separator: "\n")
        #expect(answers.filter { $0.hasPrefix("0 ") }.count == 10, "\(answers)")
        #expect(answers.suffix(2).allSatisfy { $0.hasPrefix("8 ") && $0.contains("share of sessions") }, "\(answers)")
        #expect(try loggedSessions(daemon) == 10)
        // Another user's cart and login are stored as before.
        let mine = try client.openSession()
        #expect(try client.addItem(CartMutation(session: mine, storeUID: spb.uid), productUID: product.uid).lines.count == 1)
        _ = try client.register(email: "share@example.com", password: "correct horse battery", name: "Share")
        #expect(try !client.login(email: "share@example.com", password: "correct horse battery").session.isEmpty)
    }

    /// Anonymous sessions may fill only nine tenths of the cap: the rest is
    /// kept for registrations and logins, so carts cannot lock accounts out.
    @Test func theLastTenthOfTheCapIsKeptForLogins() throws {
        let daemon = try Daemon(extraArguments: ["--max-sessions", "20", "--customer-shards", "1"])
        let client = daemon.client(timeout: 10)
        let spb = try client.store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(spb.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        for _ in 0..<18 {
            _ = try client.addItem(CartMutation(session: try client.openSession(), storeUID: spb.uid), productUID: product.uid)
        }
        expectStatus(.resourceExhausted, containing: "--max-sessions") {
            _ = try client.addItem(CartMutation(session: try client.openSession(), storeUID: spb.uid), productUID: product.uid)
        }
        _ = try client.register(email: "tenth@example.com", password: "correct horse battery", name: "Tenth")
        #expect(try !client.login(email: "tenth@example.com", password: "correct horse battery").session.isEmpty)
        #expect(try loggedSessions(daemon) == 20)
    }

    @Test(.enabled(if: clusterConninfo != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
    func aTokenOneHostIssuedIsGoodOnAnotherSharingPostgreSQL() throws {
        let database = try ScratchDatabase()
        let a = try Daemon(extraArguments: ["--store", database.conninfo])
        let b = try Daemon(extraArguments: ["--store", database.conninfo])
        let spb = try a.client().store(.cityCode("SPB"), includeProducts: true).store
        let product = try #require(spb.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let token = try a.client().openSession()
        let c = try PostgresConnection(database.conninfo)
        func stored() throws -> String? { try c.execute("SELECT count(*) AS n FROM customer_sessions")[0, "n"] }
        #expect(try b.client().cart(session: token, storeUID: spb.uid).lines.isEmpty, "B knows A's unstored token")
        #expect(try stored() == "0", "nothing stored it")
        _ = try b.client().addItem(CartMutation(session: token, storeUID: spb.uid), productUID: product.uid, quantity: 3)
        #expect(try stored() == "1", "its first change, on B, stored it")
        #expect(try a.client().cart(session: token, storeUID: spb.uid).lines.map(\.quantity) == [3])
        let forged = String(token.dropLast()) + (token.last == "0" ? "1" : "0")
        expectStatus(.unauthenticated, containing: "unknown") { _ = try b.client().cart(session: forged, storeUID: spb.uid) }
    }
}
