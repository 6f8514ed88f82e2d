@testable import GroserBench
import GroserSystem
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
        (["--method", "cart-add", "--city", "SPB"], .cartAdd(.cityCode("SPB"), productUID: nil)),
        (["--method", "cart-add", "--store", "store-spb-1", "--product", "p-1"], .cartAdd(.storeUID("store-spb-1"), productUID: "p-1")),
        (["--method", "mix", "--city", "SPB"], .mix(.cityCode("SPB"), writePercent: 10, productUID: nil)),
        (["--method", "mix", "--city", "SPB", "--write-percent", "25"], .mix(.cityCode("SPB"), writePercent: 25, productUID: nil)),
        (["--method=mix", "--store=store-spb-2", "--write-percent=0"], .mix(.storeUID("store-spb-2"), writePercent: 0, productUID: nil)),
        (["--method", "mix", "--city-uid", "city-msk", "--write-percent", "100", "--product", "p-7"],
         .mix(.cityUID("city-msk"), writePercent: 100, productUID: "p-7")),
    ])
    func methodsAndTheirArguments(args: [String], method: BenchMethod) throws {
        #expect(try parse(args).method == method)
    }

    @Test(arguments: [
        ["-c", "0"], ["-P", "x"], ["-n", "10", "-t", "1"], ["-t", "-1"], ["--method", "carts"],
        ["--method", "get-store"], ["--method", "get-store", "--city", "SPB", "--store", "s"],
        ["--city", "SPB"], ["--method", "shelf"], ["--products"], ["--bogus"], ["-c"],
        ["-c", "10", "-n", "5"], ["--json=yes"],
        // --write-percent: a whole number from 0 to 100, for mix only.
        ["--method", "mix", "--city", "SPB", "--write-percent", "101"],
        ["--method", "mix", "--city", "SPB", "--write-percent", "-1"],
        ["--method", "mix", "--city", "SPB", "--write-percent", "10.5"],
        ["--method", "mix", "--city", "SPB", "--write-percent", "ten"],
        ["--method", "mix", "--city", "SPB", "--write-percent"],
        ["--method", "get-store", "--city", "SPB", "--write-percent", "10"],
        ["--method", "cart-add", "--city", "SPB", "--write-percent", "10"],
        ["--write-percent", "10"],
        // mix: exactly one store selector, reads without products, no shelf.
        ["--method", "mix"], ["--method", "mix", "--city", "SPB", "--store", "s"],
        ["--method", "mix", "--city", "SPB", "--products"],
        ["--method", "mix", "--city", "SPB", "--shelf", "shf-spb-1-01-1"],
        ["--method", "get-store", "--city", "SPB", "--product", "p-1"],
        // --cart-lines: 1 to 10,000, for cart-add and mix only.
        ["--method", "cart-add", "--city", "SPB", "--cart-lines", "0"],
        ["--method", "cart-add", "--city", "SPB", "--cart-lines", "10001"],
        ["--method", "get-store", "--city", "SPB", "--cart-lines", "2"],
    ])
    func usageErrors(args: [String]) {
        #expect(throws: BenchUsageError.self) { try BenchOptions.parse(args) }
    }

    @Test func helpIsNotAnError() throws {
        #expect(try BenchOptions.parse(["--help"]) == .help)
        #expect(try BenchOptions.parse(["-c", "2", "-h"]) == .help)
    }

    @Test func cartLinesSetsTheCartsSizeForCartAddAndMix() throws {
        #expect(try parse(["--method", "cart-add", "--city", "SPB"]).cartLines == 1)
        #expect(try parse(["--method", "cart-add", "--city", "SPB", "--cart-lines", "20"]).cartLines == 20)
        #expect(try parse(["--method", "mix", "--city", "SPB", "--cart-lines=5"]).cartLines == 5)
        #expect(throws: BenchUsageError("--cart-lines is for --method cart-add and mix")) {
            try BenchOptions.parse(["--method", "info", "--cart-lines", "3"])
        }
    }

    @Test func threadsNeverExceedConnections() throws {
        #expect(try parse(["-c", "2", "--threads", "8"]).threads == 2)
    }

    @Test func usageErrorsSayWhatIsWrong() {
        func message(_ args: [String]) -> String {
            do { _ = try BenchOptions.parse(args); return "" } catch { return error.message }
        }
        #expect(message(["--method", "mix", "--city", "SPB", "--write-percent", "101"])
                == "--write-percent must be a whole number from 0 to 100, not \"101\"")
        #expect(message(["--method", "get-store", "--city", "SPB", "--write-percent", "10"])
                == "--write-percent is for --method mix")
        #expect(message(["--method", "mix"]) == "--method mix needs exactly one of --city, --city-uid or --store")
        #expect(message(["--method", "mix", "--city", "SPB", "--products"]) == "--products is for --method get-store")
    }

    @Test func theHelpListsTheMixAndItsOption() {
        #expect(BenchOptions.usage.contains("cart-add, mix or search"))
        #expect(BenchOptions.usage.contains("--write-percent N"))
    }
}

@Suite("groser-bench search")
struct BenchSearchOptionsTests {
    @Test func queriesComeFromTheCommandLineAndAFile() throws {
        let dir = try Files.makeTemporaryDirectory(prefix: "gbq")
        let path = dir + "/queries"
        try Files.writeAtomically(path, Array("молоко\n\n  \nсыр гауда\n".utf8))
        defer { try? Files.remove(path); try? Files.removeDirectory(dir) }
        guard case .run(let o) = try BenchOptions.parse(["--method", "search", "--city", "SPB", "--query", "кефир", "--queries", path]) else {
            Issue.record("not a run")
            return
        }
        #expect(o.method == .search(.cityCode("SPB"), queries: ["кефир", "молоко", "сыр гауда"]))
        #expect(o.method.responseField == .searchProducts)
        func message(_ args: [String]) -> String {
            do { _ = try BenchOptions.parse(args); return "" } catch { return error.message }
        }
        #expect(message(["--method", "search", "--city", "SPB"]) == "--method search needs --query TEXT or --queries FILE")
        #expect(message(["--method", "info", "--query", "x"]) == "--query and --queries are for --method search")
        #expect(message(["--method", "search", "--city", "SPB", "--queries", "/nonexistent/q"]) == "--queries: cannot read /nonexistent/q")
    }
}
