import Foundation
import GroserClient
import GroserSystem
import Testing

/// Issue 32 §4 through a real groserd: another local user (uid 65534, a
/// member of `--socket-group`) floods Register and Login, pipelines wrong
/// guesses, and guesses at the victim's password, while the victim (root,
/// another uid) logs in with the right one.
@Suite("login attacks from another uid", .serialized)
struct LoginAttackTests {
    static let password = "correct horse battery"
    static let nobody: UInt32 = 65_534

    /// A daemon whose socket the attacker may use, and a 0777 directory the
    /// attacker's script reports into.
    func daemon(_ extra: [String] = []) throws -> (Daemon, String) {
        try Privileged.requireOtherUsers()
        try Privileged.require("/usr/bin/python3 for the attacker's raw client",
                               missing: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? nil : "it is missing")
        let dir = Daemon.makeTemporaryDirectory()
        chmod(dir, 0o711)
        let d = try Daemon(directory: dir, extraArguments: ["--socket-group", "nogroup"] + extra)
        let reports = dir + "/attacker"
        mkdir(reports, 0o777)
        chmod(reports, 0o777)
        try Data(Self.script.utf8).write(to: URL(fileURLWithPath: dir + "/attack.py"))
        chmod(dir + "/attack.py", 0o644)
        return (d, reports)
    }

    func uniqueEmail(_ tag: String) -> String { "\(tag)-\((try? KernelRandom.hex(4)) ?? "x")@example.com" }

    /// Runs the attacker's script as nobody until it ends: `count` requests
    /// pipelined on one connection; answers counted by status name.
    func pipelined(_ d: Daemon, method: String, email: String, password: String, count: Int) throws -> [String: Int] {
        let config = ["socket": d.socketPath, "method": method, "email": email, "password": password, "count": count] as [String: Any]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: config), as: UTF8.self)
        let r = try runProgram("/usr/bin/python3", [d.directory + "/attack.py", json], environment: minimalEnvironment(), as: Self.nobody)
        guard r.status == 0, let counts = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Int] else {
            throw TestFailure("the attacker's script failed (\(r.status)): \(r.err)")
        }
        return counts
    }

    /// Starts the attacker's script as nobody in the background: `connections`
    /// connections, each keeping `window` requests in flight for `seconds`.
    /// Returns once its first answers came back (the flood is on).
    func flood(_ d: Daemon, reports: String, method: String, email: String, password: String,
               connections: Int, window: Int, seconds: Double) throws -> Background {
        let config = ["socket": d.socketPath, "method": method, "email": email, "password": password,
                      "connections": connections, "window": window, "seconds": seconds,
                      "started": reports + "/started", "out": reports + "/counts"] as [String: Any]
        try? FileManager.default.removeItem(atPath: reports + "/started")
        try? FileManager.default.removeItem(atPath: reports + "/counts")
        let json = String(decoding: try JSONSerialization.data(withJSONObject: config), as: UTF8.self)
        let b = try Background("/usr/bin/python3", [d.directory + "/attack.py", json], environment: minimalEnvironment(), as: Self.nobody)
        #expect(eventually { FileManager.default.fileExists(atPath: reports + "/started") || !b.process.isRunning },
                "the flood did not start")
        return b
    }

    /// The flood's answers by status name, once it has ended.
    func floodCounts(_ b: Background, reports: String) throws -> [String: Int] {
        #expect(b.waitForExit(seconds: TestTime.seconds(60)) == 0, "the flood script: \(b.errorOutput)")
        let data = try Data(contentsOf: URL(fileURLWithPath: reports + "/counts"))
        return try JSONSerialization.jsonObject(with: data) as? [String: Int] ?? [:]
    }

    /// The victim's correct logins while `running` holds (at least `minimum`):
    /// each one's status (nil: OK) and milliseconds.
    func victimLogins(_ client: GroserClient, _ email: String, minimum: Int, while running: () -> Bool) -> [(Status?, Double)] {
        var results: [(Status?, Double)] = []
        while results.count < minimum || (running() && results.count < 200) {
            let start = monotonicNanoseconds()
            var status: Status?
            do { _ = try client.login(email: email, password: Self.password) } catch { status = error.status ?? Status(.unknown, "\(error)") }
            results.append((status, Double(monotonicNanoseconds() - start) / 1e6))
        }
        return results
    }

    /// Real checks a throttled pair can get since `start` (its last allowed
    /// failure): each is followed by a doubling wait (1 s, 2 s, 4 s…), so the
    /// k-th comes 2^k − 1 s after the limit was reached.
    static func checksAfterTheLimit(since start: UInt64) -> Int {
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        return Int(log2(elapsed + 1))
    }

    func summary(_ results: [(Status?, Double)]) -> String {
        let ms = results.map(\.1).sorted()
        let refused = results.compactMap(\.0).map { "\($0.code): \($0.message)" }
        return "\(results.count) logins, p50 \(Int(ms[ms.count / 2])) ms, max \(Int(ms.last ?? 0)) ms; refused: \(Set(refused))"
    }

    @Test func aRegisterFloodOnATakenEmailLeavesAnotherUidsLoginAnswered() throws {
        let (d, reports) = try daemon()
        let client = d.client(timeout: 30)
        let email = uniqueEmail("victim")
        _ = try client.register(email: email, password: Self.password, name: "Victim")
        // 3 s, not scaled: the throttle's waits are real time.
        let started = monotonicNanoseconds()
        let b = try flood(d, reports: reports, method: "register", email: email, password: "attacker password",
                          connections: 8, window: 40, seconds: 3)
        let results = victimLogins(client, email, minimum: 8) { b.process.isRunning }
        let counts = try floodCounts(b, reports: reports)
        #expect(results.allSatisfy { $0.0 == nil }, "\(summary(results)); the flood: \(counts)")
        #expect(counts["OK", default: 0] == 0, "the taken email was not registered again: \(counts)")
        // 5, then one more as each doubling wait (1 s, 2 s, 4 s…) ends.
        let allowed = 5 + Self.checksAfterTheLimit(since: started)
        #expect(counts["ALREADY_EXISTS", default: 0] <= allowed, "the flood is throttled per (email, uid): \(counts)")
    }

    @Test func oneUidsLoginFloodLeavesAnotherUidsTurn() throws {
        // No failure limit per uid here, so the attacker's wrong logins (on
        // emails without accounts) all reach the hashing queue.
        let (d, reports) = try daemon(["--login-failures-per-peer", "0"])
        let client = d.client(timeout: 30)
        let email = uniqueEmail("victim")
        _ = try client.register(email: email, password: Self.password, name: "Victim")
        let b = try flood(d, reports: reports, method: "login", email: "ghost-{i}@example.com", password: "wrong password",
                          connections: 8, window: 40, seconds: TestTime.seconds(3))
        let results = victimLogins(client, email, minimum: 8) { b.process.isRunning }
        let counts = try floodCounts(b, reports: reports)
        #expect(results.allSatisfy { $0.0 == nil }, "\(summary(results)); the flood: \(counts)")
        #expect(counts["RESOURCE_EXHAUSTED", default: 0] > 0, "the attacker's own queue has a bound: \(counts)")
    }

    @Test func anotherUidsWrongGuessesDoNotLockTheOwnerOut() throws {
        let (d, reports) = try daemon()
        let client = d.client(timeout: 30)
        let email = uniqueEmail("victim")
        _ = try client.register(email: email, password: Self.password, name: "Victim")
        // Before the guesses, so that the bound below errs on the attacker's side.
        let throttled = monotonicNanoseconds()
        let guesses = try pipelined(d, method: "login", email: email, password: "wrong password", count: 20)
        #expect(guesses["UNAUTHENTICATED"] == 5 && guesses["RESOURCE_EXHAUSTED"] == 15, "\(guesses)")
        #expect(try client.login(email: email, password: Self.password).account.email == email,
                "the attacker's failures slow the attacker, not the account's owner")
        // 2 s, not scaled: the throttle's waits are real time.
        let b = try flood(d, reports: reports, method: "login", email: email, password: "wrong password",
                          connections: 1, window: 4, seconds: 2)
        let results = victimLogins(client, email, minimum: 5) { b.process.isRunning }
        let counts = try floodCounts(b, reports: reports)
        #expect(results.allSatisfy { $0.0 == nil }, "\(summary(results)); the attacker: \(counts)")
        #expect(counts["UNAUTHENTICATED", default: 0] <= Self.checksAfterTheLimit(since: throttled),
                "the attacker stays throttled: \(counts)")
    }

    @Test func pipelinedWrongLoginsGetExactlyTheLimitOfRealChecks() throws {
        let (d, _) = try daemon()
        _ = try d.client().register(email: "pipelined@example.com", password: Self.password, name: "P")
        let one = try pipelined(d, method: "login", email: "pipelined@example.com", password: "wrong password", count: 40)
        #expect(one["UNAUTHENTICATED"] == 5 && one["RESOURCE_EXHAUSTED"] == 35, "per (account, uid): \(one)")
        // Over many emails the uid's limit (50) holds, counting the 5 above.
        let many = try pipelined(d, method: "login", email: "many-{i}@example.com", password: "wrong password", count: 70)
        #expect(many["UNAUTHENTICATED"] == 45 && many["RESOURCE_EXHAUSTED"] == 25, "per uid: \(many)")
    }

    @Test func registerIsThrottledPerUid() throws {
        let (d, _) = try daemon()
        let counts = try pipelined(d, method: "register", email: "new-{i}@example.com", password: "attacker password", count: 30)
        #expect(counts["OK"] == 20 && counts["RESOURCE_EXHAUSTED"] == 10, "20 registrations per uid at once: \(counts)")
        // Another uid (root here) is not held up by them.
        let email = uniqueEmail("other")
        #expect(try d.client().register(email: email, password: Self.password, name: "Other").email == email)
    }

    @Test func theNFCAndNFDFormsOfAnEmailAreOneAccount() throws {
        let d = try Daemon()
        let client = d.client(timeout: 30)
        let tag = (try? KernelRandom.hex(4)) ?? "x"
        let nfc = "jos\u{E9}-\(tag)@example.com", nfd = "jose\u{301}-\(tag)@example.com"
        let account = try client.register(email: nfd, password: Self.password, name: "José")
        #expect(Array(account.email.utf8) == Array(nfc.utf8), "stored in NFC")
        do {
            _ = try client.register(email: nfc, password: Self.password, name: "José")
            Issue.record("the NFC form made a second account")
        } catch {
            #expect(error.status?.code == .alreadyExists, "\(error)")
        }
        #expect(Array(try client.login(email: nfc, password: Self.password).account.email.utf8) == Array(nfc.utf8))
        #expect(Array(try client.login(email: nfd, password: Self.password).account.email.utf8) == Array(nfc.utf8))
    }

    /// The attacker's raw client: Register or Login frames, pipelined on one
    /// connection (`count`), or kept `window` in flight on each of
    /// `connections` connections for `seconds`. Prints (or writes to `out`)
    /// the answers counted by status name. `{i}` in the email is replaced
    /// by the request's number.
    static let script = #"""
import json, socket, struct, sys, threading, time
cfg = json.loads(sys.argv[1])
NAMES = {0: "OK", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 6: "ALREADY_EXISTS", 8: "RESOURCE_EXHAUSTED",
         13: "INTERNAL", 14: "UNAVAILABLE", 16: "UNAUTHENTICATED"}
lock = threading.Lock()
counts = {}
next_id = [0]

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def ld(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data

def frame():
    with lock:
        next_id[0] += 1
        i = next_id[0]
    email = cfg["email"].replace("{i}", str(i)).encode()
    password = cfg["password"].encode()
    if cfg["method"] == "register":
        method = ld(26, ld(1, email) + ld(2, password) + ld(3, b"Flood"))
    else:
        method = ld(27, ld(1, email) + ld(2, password))
    body = varint(1 << 3) + varint(i) + method
    return struct.pack(">I", len(body)) + body

def fields(b):
    p, out = 0, {}
    def read_varint():
        nonlocal p
        r = s = 0
        while True:
            c = b[p]
            p += 1
            r |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return r
    while p < len(b):
        key = read_varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            v = read_varint()
        elif wire == 2:
            n = read_varint()
            v = b[p:p + n]
            p += n
        elif wire == 1:
            v = b[p:p + 8]
            p += 8
        else:
            v = b[p:p + 4]
            p += 4
        out.setdefault(num, v)
    return out

def recv_exact(s, n):
    data = bytearray()
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("groserd closed the connection")
        data += chunk
    return bytes(data)

def answer(s):
    body = recv_exact(s, struct.unpack(">I", recv_exact(s, 4))[0])
    status = fields(fields(body).get(2, b""))
    name = NAMES.get(status.get(1, 0), str(status.get(1, 0)))
    with lock:
        counts[name] = counts.get(name, 0) + 1
    if "started" in cfg:
        open(cfg["started"], "a").close()

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(cfg["socket"])
    return s

def keep_in_flight(deadline):
    s = connect()
    s.sendall(b"".join(frame() for _ in range(cfg["window"])))
    while time.monotonic() < deadline:
        answer(s)
        s.sendall(frame())
    for _ in range(cfg["window"]):
        answer(s)
    s.close()

if "count" in cfg:
    s = connect()
    s.sendall(b"".join(frame() for _ in range(cfg["count"])))
    for _ in range(cfg["count"]):
        answer(s)
else:
    deadline = time.monotonic() + cfg["seconds"]
    threads = [threading.Thread(target=keep_in_flight, args=(deadline,)) for _ in range(cfg["connections"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
out = json.dumps(counts)
if "out" in cfg:
    with open(cfg["out"], "w") as f:
        f.write(out)
else:
    print(out)
"""#
}
