@testable import GroserStorage
@testable import GroserSystem
import GroserWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The customer log on real files: what a crash or a damaged disk leaves,
/// and what recovery, repair and compaction make of it.
@Suite("customer log")
struct CustomerLogTests {
    static let key = SessionKey(token: "0123456789abcdef0123456789abcdef")

    /// Three batches: a session, then a cart of one line, then a second line
    /// (a line change, as most cart mutations are logged).
    static func write(_ dir: String) throws -> [Int] {
        let log = CustomerLog(directory: dir)
        var state = CustomerState()
        _ = try log.recover(into: &state)
        var ends: [Int] = []
        try log.append([.session(key, createdAtUnix: 10)]); ends.append(log.activeBytes)
        try log.append([.cart(key, storeUID: "s", StoredCart(version: 1, lines: [CartLineRecord(productUID: "p1", quantity: 1, seenPriceMinorUnits: 5)]), atUnix: 11)])
        ends.append(log.activeBytes)
        try log.append([.cartLine(key, storeUID: "s", CartLineChange(version: 2, productUID: "p2", quantity: 3,
                                                                     seenPriceMinorUnits: 7), atUnix: 12)])
        ends.append(log.activeBytes)
        return ends
    }

    /// Every cut offset, once as a file that ends there (an append torn on
    /// a file without space ahead) and once followed by zeros (torn inside
    /// the space the log writes ahead of its data).
    @Test(arguments: [false, true])
    func aLogCutAtEveryByteOfItsLastRecordsLoadsEveryCompleteRecord(zerosAhead: Bool) throws {
        let dir = try TemporaryDirectory()
        let ends = try Self.write(dir.path)
        let segment = dir.path + "/log-00000000"
        let file = try #require(try Files.read(segment))
        #expect(file.count > ends[2] && file[ends[2]...].allSatisfy { $0 == 0 }, "zeros are written ahead of the data")
        let whole = Array(file[0..<ends[2]])
        for cut in ends[0]...whole.count {
            let copy = try TemporaryDirectory()
            let zeros = zerosAhead ? [UInt8](repeating: 0, count: 4096) : []
            try Files.writeAtomically(copy.path + "/log-00000000", Array(whole[0..<cut]) + zeros)
            var state = CustomerState()
            let report = try CustomerLog(directory: copy.path).recover(into: &state)
            let version = state.sessions[Self.key]?.carts["s"]?.version
            // With zeros after it, a record whose missing bytes were zeros is whole again.
            var cut = cut
            while zerosAhead && cut < whole.count && whole[cut] == 0 { cut += 1 }
            // Every complete record is kept; the partial one is dropped.
            let expected: UInt64? = cut >= ends[2] ? 2 : cut >= ends[1] ? 1 : nil
            #expect(version == expected, "cut at \(cut)")
            #expect(state.sessions[Self.key] != nil, "cut at \(cut)")
            let torn = cut != ends[0] && cut != ends[1] && cut != ends[2]
            #expect((report.droppedTail != nil) == torn, "cut at \(cut): \(String(describing: report.droppedTail))")
            if torn {
                // Cut off on disk: the next append follows the last good record.
                #expect(try Files.read(copy.path + "/log-00000000")?.count == (cut >= ends[1] ? ends[1] : ends[0]))
                let tornBytes = cut - (cut >= ends[1] ? ends[1] : ends[0])
                #expect((1...tornBytes).contains(report.droppedTail?.bytes ?? 0), "the torn bytes, not the zeros ahead")
            }
        }
    }

    @Test func anAppendAfterARestartFollowsTheLastRecordNotTheZerosAhead() throws {
        let dir = try TemporaryDirectory()
        _ = try Self.write(dir.path)
        let log = CustomerLog(directory: dir.path)
        var state = CustomerState()
        let report = try log.recover(into: &state)
        #expect(report.droppedTail == nil, "zeros ahead are not a torn record")
        try log.append([.cart(Self.key, storeUID: "t", StoredCart(version: 9, lines: []), atUnix: 13)])
        var reloaded = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &reloaded)
        #expect(reloaded.sessions[Self.key]?.carts["s"]?.version == 2)
        #expect(reloaded.sessions[Self.key]?.carts["t"]?.version == 9)
    }

    @Test func aDamagedRecordInTheMiddleRefusesWithItsOffsetAndRepairCutsThere() throws {
        let dir = try TemporaryDirectory()
        let ends = try Self.write(dir.path)
        let segment = dir.path + "/log-00000000"
        var bytes = try #require(try Files.read(segment))
        bytes[ends[0] + 12] ^= 0xff  // inside the second record's payload
        try Files.writeAtomically(segment, bytes)
        var state = CustomerState()
        let error = #expect(throws: StorageError.self) { _ = try CustomerLog(directory: dir.path).recover(into: &state) }
        #expect(error?.description.contains("damaged at byte \(ends[0])") == true, "\(String(describing: error))")
        #expect(error?.description.contains("--repair") == true)
        let lines = try CustomerLog.repair(directory: dir.path)
        #expect(lines.count == 1 && lines[0].contains("cut at byte \(ends[0])"), "\(lines)")
        var repaired = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &repaired)
        #expect(repaired.sessions[Self.key] != nil && repaired.sessions[Self.key]?.carts.isEmpty == true)
    }

    @Test func compactionFoldsSealedSegmentsIntoASnapshotThatLoadsTheSameState() throws {
        let dir = try TemporaryDirectory()
        let log = CustomerLog(directory: dir.path, segmentBytes: 1)
        var state = CustomerState()
        _ = try log.recover(into: &state)
        var expected = CustomerState()
        for i in 0..<50 {
            let k = SessionKey(token: "token-\(i)")
            let records: [CustomerRecord] = [
                .session(k, createdAtUnix: 100),
                .cart(k, storeUID: "s", StoredCart(version: UInt64(i), lines: []), atUnix: 101),
                .answer(k, key: "old", StoredAnswer(IdempotentAnswer(fingerprint: "f", field: 1, body: [1]), atUnix: 1)),
            ]
            try log.append(records)
            for r in records { expected.apply(r) }
            #expect(try log.checkpointDue(), "a 1-byte segment is full after every append")
        }
        let kept = try log.compact { $0.sessions.modifyEach { _, s in s.answers = [:] } }
        #expect(kept == 50)
        let names = try LogFile.names(in: dir.path).sorted()
        #expect(names.filter { $0.hasPrefix("snapshot-") } == ["snapshot-00000050"], "\(names)")
        #expect(names.filter { $0.hasPrefix("log-") } == ["log-00000050"], "only the active segment is left: \(names)")
        var reloaded = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &reloaded)
        for (k, s) in expected.sessions {
            #expect(reloaded.sessions[k]?.carts == s.carts)
            #expect(reloaded.sessions[k]?.answers.isEmpty == true, "what expire dropped stays dropped")
        }
        #expect(reloaded.sessions.count == 50)
    }

    @Test func accountRecordsSurviveTheLogAndASnapshot() throws {
        let dir = try TemporaryDirectory()
        let log = CustomerLog(directory: dir.path, segmentBytes: 1)
        var state = CustomerState()
        _ = try log.recover(into: &state)
        let owner = SessionKey(accountEmail: "ann@example.com")
        let bound = SessionKey(token: "bound"), guest = SessionKey(token: "guest")
        let answer = StoredAnswer(IdempotentAnswer(fingerprint: "login|", field: 27, body: [1, 2, 3]), atUnix: 50)
        let records: [CustomerRecord] = [
            .account(owner, AccountRecord(email: "ann@example.com", name: "Ann", passwordHash: "$argon2id$v=19$x", createdAtUnix: 40)),
            .cart(owner, storeUID: "s", StoredCart(version: 2, lines: [CartLineRecord(productUID: "p", quantity: 3, seenPriceMinorUnits: 9)]), atUnix: 41),
            .boundSession(bound, owner: owner, createdAtUnix: 42),
            .session(guest, createdAtUnix: 43),
            .sealed(guest, owner: owner),
            .absorbed(owner: owner, guest: guest, answer),
        ]
        var expected = CustomerState()
        for r in records { try log.append([r]); expected.apply(r); _ = try log.checkpointDue() }
        #expect(SessionKey(accountEmail: "ann@example.com") != SessionKey(token: "ann@example.com"), "no token hashes to an account's key")
        var reloaded = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &reloaded)
        #expect(reloaded.sessions == expected.sessions)
        _ = try log.compact { _ in }
        var fromSnapshot = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &fromSnapshot)
        #expect(fromSnapshot.sessions == expected.sessions, "the snapshot writes every kind back")
        #expect(fromSnapshot.sessions[owner]?.account?.name == "Ann")
        #expect(fromSnapshot.sessions[bound]?.owner == owner && fromSnapshot.sessions[guest]?.sealedInto == owner)
        // Accounts never expire for idleness; their sessions do.
        _ = fromSnapshot.expire(nowUnix: 1_000_000, answerLifetime: 10, idleLifetime: 10)
        #expect(fromSnapshot.sessions[owner] != nil && fromSnapshot.sessions[bound] == nil)
        #expect(fromSnapshot.sessions[owner]?.absorbed.isEmpty == true, "merge answers expire like idempotency answers")
    }

    @Test func expiryDropsOldAnswersAndIdleSessions() {
        var state = CustomerState()
        let a = SessionKey(token: "a"), b = SessionKey(token: "b")
        state.apply(.session(a, createdAtUnix: 0))
        state.apply(.session(b, createdAtUnix: 0))
        state.apply(.answer(a, key: "old", StoredAnswer(IdempotentAnswer(fingerprint: "f", field: 1, body: []), atUnix: 10)))
        state.apply(.answer(a, key: "new", StoredAnswer(IdempotentAnswer(fingerprint: "f", field: 1, body: []), atUnix: 95)))
        let removed = state.expire(nowUnix: 100, answerLifetime: 50, idleLifetime: 90)
        #expect(removed == [b], "b was idle since 0; a was active at 95")
        #expect(state.sessions[a]?.answers.keys.sorted() == ["new"])
    }

    /// Waits up to 10 s for `condition`.
    private static func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            OSThread.sleep(milliseconds: 10)
        }
        return condition()
    }

    @Test func theNextZerosAreWrittenAheadInTheBackgroundOnceHalfAreUsed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/log-00000000"
        let ahead = 64 << 10
        let file = try LogFile(path: path, preallocateBytes: ahead)
        // The first append finds no zeros ahead and writes them itself.
        try file.appendDurably([UInt8](repeating: 7, count: 1000))
        #expect(file.allocated == 1000 + ahead)
        // Less than half of them used: nothing more is written.
        // An append decides on a fill before it returns (it sets `filling`,
        // which stays set until the fill has grown `allocated`): both are
        // looked at now, with no pause for a fill that should not come.
        try file.appendDurably([UInt8](repeating: 8, count: 20_000))
        #expect(!file.isFilling && file.allocated == 1000 + ahead, "a fill began before half the zeros were used")
        // More than half used: the next 64 KiB follow with no append.
        try file.appendDurably([UInt8](repeating: 9, count: 20_000))
        #expect(Self.eventually { file.allocated == 1000 + 2 * ahead }, "allocated \(file.allocated)")
        let bytes = try #require(try Files.read(path))
        #expect(bytes.count == 1000 + 2 * ahead)
        #expect(bytes[0..<1000].allSatisfy { $0 == 7 } && bytes[1000..<21_000].allSatisfy { $0 == 8 }
                && bytes[21_000..<41_000].allSatisfy { $0 == 9 })
        #expect(bytes[41_000...].allSatisfy { $0 == 0 }, "only zeros after the data")
    }

    /// Small zeros ahead, so that appends keep running into fills in
    /// progress: the filler must never write a zero where data went.
    @Test func appendsRacingTheFillerLoseNoByte() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/log-00000000"
        let file = try LogFile(path: path, preallocateBytes: 8192)
        var rng = SplitMix64(seed: 42)
        var expected: [UInt8] = []
        for i in 0..<3000 {
            let count = Int(rng.next() % 3000) + 1
            let chunk = [UInt8](repeating: UInt8(i % 255 + 1), count: count)
            try file.appendDurably(chunk)
            expected += chunk
        }
        #expect(file.size == expected.count)
        let bytes = try #require(try Files.read(path))
        #expect(bytes.count >= expected.count)
        let firstWrong = expected.indices.first { bytes[$0] != expected[$0] }
        #expect(firstWrong == nil, "byte \(firstWrong ?? -1) of \(expected.count) differs")
        #expect(bytes[expected.count...].allSatisfy { $0 == 0 }, "only zeros after the data")
    }

    @Test func anAppendPastTheZerosWaitsForTheFillInProgressAndLosesNoByte() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/log-00000000"
        let file = try LogFile(path: path, preallocateBytes: 8192)
        try file.appendDurably([UInt8](repeating: 1, count: 1000))  // zeros to 9,192, written by the append
        file.pauseFills(milliseconds: 300)
        try file.appendDurably([UInt8](repeating: 2, count: 5000))  // under half left: a fill of 9,192..<17,384 starts, late
        #expect(Self.eventually { file.fillBeingWrittenFrom == 9192 })
        try file.appendDurably([UInt8](repeating: 3, count: 8000))  // to 14,000: past the zeros, into the fill's range
        // It waited, and went on only once that fill was done: the filler
        // is no longer writing from 9,192 (it is idle, or on the next fill).
        // (Not a time bound: how much of the 300 ms pause was left depends
        // on how fast the lines above ran.)
        let fillingFrom = file.fillBeingWrittenFrom
        #expect(file.appendsThatWaitedForAFill == 1)
        #expect(fillingFrom != 9192, "the append went on with the filler still to write where it wrote")
        // The fill's zeros then covered it: no zeros written by the append
        // itself, and the next fill (under half left again) follows them.
        #expect(Self.eventually { !file.isFilling })
        #expect(file.allocated == 9192 + 2 * 8192)
        let bytes = try #require(try Files.read(path))
        #expect(bytes.count == 9192 + 2 * 8192)
        #expect(bytes[0..<1000].allSatisfy { $0 == 1 } && bytes[1000..<6000].allSatisfy { $0 == 2 }
                && bytes[6000..<14_000].allSatisfy { $0 == 3 })
        #expect(bytes[14_000...].allSatisfy { $0 == 0 }, "only zeros after the data")
    }
}
