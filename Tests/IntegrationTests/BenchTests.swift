import Foundation
import Testing

@Suite("the groser-bench binary against a real groserd", .serialized)
struct BenchTests {
    let daemon: Daemon
    init() throws { daemon = try Daemon() }

    func runBench(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.binDirectory + "/groser-bench")
        p.arguments = ["--socket", daemon.socketPath] + arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    @Test func everyNotFoundAnswerIsCountedAsAnErrorWithCode5() throws {
        let r = try runBench(["-c", "4", "-P", "8", "-n", "2000", "--method", "get-store", "--city", "NOPE", "--json"])
        #expect(r.status != 0, "a run where every request failed does not exit 0")
        let lines = r.out.split(separator: "\n")
        let first = try #require(lines.first)
        let parsed = try JSONSerialization.jsonObject(with: Data(first.utf8))
        let object = try #require(parsed as? [String: Any])
        #expect(object["succeeded"] as? Int == 0)
        #expect(object["failed"] as? Int == 2000)
        #expect(object["answered"] as? Int == 2000)
        #expect((object["errors_by_code"] as? [String: Any])?["5"] as? Int == 2000)
        #expect(object["rps"] as? Double == 0)
        #expect(lines.last?.hasPrefix("rps=0 p50_us=") == true)
    }

    @Test func aTimedPipelinedRunSucceedsAndEndsWithItsLastLine() throws {
        let r = try runBench(["-c", "8", "-P", "16", "-t", "0.5", "--threads", "2", "--method", "get-store", "--city", "SPB"])
        #expect(r.status == 0, "\(r.out)\(r.err)")
        #expect(r.out.contains("errors:          none"))
        let last = try #require(r.out.split(separator: "\n").last)
        #expect(last.wholeMatch(of: /rps=[1-9][0-9]* p50_us=[0-9]+ p99_us=[0-9]+/) != nil, "\(last)")
    }

    @Test func cartAddGivesEachConnectionItsOwnSessionAndCountsWhatCommitted() throws {
        let r = try runBench(["-c", "4", "-P", "4", "-n", "200", "--method", "cart-add", "--city", "SPB", "--json"])
        // The daemon's default limit is 99 a line: 50 adds per connection fit.
        #expect(r.status == 0, "\(r.out)\(r.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data((r.out.split(separator: "\n").first ?? "").utf8)) as? [String: Any])
        #expect(object["succeeded"] as? Int == 200)
        // Past the limit every add is refused, and counted as a failure.
        let over = try runBench(["-c", "1", "-P", "1", "-n", "120", "--method", "cart-add", "--city", "SPB", "--json"])
        #expect(over.status != 0)
        let o = try #require(try JSONSerialization.jsonObject(with: Data((over.out.split(separator: "\n").first ?? "").utf8)) as? [String: Any])
        #expect(o["succeeded"] as? Int == 99)
        #expect((o["errors_by_code"] as? [String: Any])?["9"] as? Int == 21)
    }

    @Test func cartLinesFillsEachCartBeforeTheRunAndEveryAnswerShowsThem() throws {
        func body(_ args: [String]) throws -> Double {
            let r = try runBench(["-c", "2", "-n", "20", "--method", "cart-add", "--city", "SPB", "--json"] + args)
            #expect(r.status == 0, "\(r.out)\(r.err)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data((r.out.split(separator: "\n").first ?? "").utf8)) as? [String: Any])
            #expect(object["succeeded"] as? Int == 20)
            return try #require(object["body_bytes_per_request"] as? Double)
        }
        // Every answer is the whole cart: five lines of a product each are
        // well over three times the answer of one.
        let one = try body([])
        let five = try body(["--cart-lines", "5"])
        #expect(five > 3 * one, "one line: \(one) bytes, five: \(five)")
        // More lines than the store has products in stock: a clear refusal.
        let over = try runBench(["-c", "1", "-n", "1", "--method", "cart-add", "--city", "SPB", "--cart-lines", "10000"])
        #expect(over.status == 1)
        #expect(over.err.contains("--cart-lines 10000: the store"), "\(over.err)")
    }

    @Test func aMixCountsReadsAndWritesApartAndTogether() throws {
        let r = try runBench(["-c", "4", "-P", "4", "-n", "200", "--method", "mix", "--city", "SPB", "--write-percent", "10", "--json"])
        #expect(r.status == 0, "\(r.out)\(r.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data((r.out.split(separator: "\n").first ?? "").utf8)) as? [String: Any])
        #expect(object["succeeded"] as? Int == 200)
        let reads = try #require(object["reads"] as? [String: Any])
        let writes = try #require(object["writes"] as? [String: Any])
        // 50 requests a connection, one in ten a write: 5 adds a session, under the limit of 99.
        #expect(reads["succeeded"] as? Int == 180)
        #expect(writes["succeeded"] as? Int == 20)
        #expect(reads["method"] as? String == "get-store --city SPB")
        #expect(writes["method"] as? String == "cart-add --city SPB")
        let readLatency = try #require(reads["latency_us"] as? [String: Any])
        #expect((readLatency["p99"] as? Double ?? 0) > 0)
        let text = try runBench(["-c", "2", "-n", "20", "--method", "mix", "--city", "SPB"])
        #expect(text.status == 0, "\(text.out)\(text.err)")
        #expect(text.out.contains("\nreads:           get-store --city SPB: 18 ok, 0 failed, "))
        #expect(text.out.contains("\nwrites:          cart-add --city SPB: 2 ok, 0 failed, "))
    }

    @Test func aMissingServerIsReportedAndExits1() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Daemon.binDirectory + "/groser-bench")
        p.arguments = ["--socket", daemon.directory + "/nothing.sock", "-c", "1", "-n", "10"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect(e.contains("cannot connect"))
    }
}
