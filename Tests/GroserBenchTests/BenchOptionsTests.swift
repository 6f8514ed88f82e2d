@testable import GroserBench
import GroserWire
import Testing

@Suite("groser-bench's command line")
struct BenchOptionsTests {
    func parse(_ args: [String]) throws -> BenchOptions {
        guard case .run(let options) = try BenchOptions.parse(args) else {
            throw BenchUsageError("asked for help")
        }
        return options
    }

    @Test func redisBenchmarkShapedOptions() throws {
        let o = try parse(["--socket", "/tmp/x.sock", "-c", "50", "-P", "16", "-t", "5",
                           "--method", "get-store", "--city", "SPB", "--threads", "2", "--json"])
        #expect(o.socketPath == "/tmp/x.sock")
        #expect(o.connections == 50)
        #expect(o.pipeline == 16)
        #expect(o.length == .seconds(5))
        #expect(o.method == .getStore(.cityCode("SPB"), includeProducts: false))
        #expect(o.threads == 2)
        #expect(o.json)
    }

    @Test func defaultsAreRedisBenchmarks() throws {
        let o = try parse([])
        #expect(o.connections == 50 && o.pipeline == 1 && o.length == .requests(100_000))
        #expect(o.method == .serverInfo)
        #expect(o.threads == 1)
    }

    @Test(arguments: [
        (["--method", "info"], BenchMethod.serverInfo),
        (["--method", "cities"], .listCities),
        (["--method=get-store", "--store=store-spb-2", "--products"], .getStore(.storeUID("store-spb-2"), includeProducts: true)),
        (["--method", "get-store", "--city-uid", "city-msk"], .getStore(.cityUID("city-msk"), includeProducts: false)),
        (["--method", "shelf", "--shelf", "shf-spb-1-01-1"], .getShelf(uid: "shf-spb-1-01-1")),
    ])
    func methodsAndTheirArguments(args: [String], method: BenchMethod) throws {
        #expect(try parse(args).method == method)
    }

    @Test(arguments: [
        ["-c", "0"], ["-P", "x"], ["-n", "10", "-t", "1"], ["-t", "-1"], ["--method", "carts"],
        ["--method", "get-store"], ["--method", "get-store", "--city", "SPB", "--store", "s"],
        ["--city", "SPB"], ["--method", "shelf"], ["--products"], ["--bogus"], ["-c"],
        ["-c", "10", "-n", "5"], ["--json=yes"],
    ])
    func usageErrors(args: [String]) {
        #expect(throws: BenchUsageError.self) { try BenchOptions.parse(args) }
    }

    @Test func helpIsNotAnError() throws {
        #expect(try BenchOptions.parse(["--help"]) == .help)
        #expect(try BenchOptions.parse(["-c", "2", "-h"]) == .help)
    }

    @Test func threadsNeverExceedConnections() throws {
        #expect(try parse(["-c", "2", "--threads", "8"]).threads == 2)
    }
}
