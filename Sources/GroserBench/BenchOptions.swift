import GroserClient
import GroserSystem
import GroserWire

/// A command line groser-bench cannot run as written (exit code 2).
public struct BenchUsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// How long a run lasts.
public enum BenchLength: Sendable, Equatable {
    /// This many requests in all, spread evenly over the connections.
    case requests(Int)
    /// Send for this many seconds, then wait for the answers in flight.
    case seconds(Double)
}

/// Everything groser-bench can be told; the shape of redis-benchmark's options.
public struct BenchOptions: Sendable, Equatable {
    public var socketPath = GroserClient.defaultSocketPath()
    public var connections = 50
    /// Requests in flight per connection.
    public var pipeline = 1
    public var length = BenchLength.requests(100_000)
    public var method = BenchMethod.serverInfo
    /// Load generator threads, each owning a share of the connections.
    public var threads = 1
    /// A run of this length first, thrown away (caches and the server warm up).
    public var warmupSeconds = 0.0
    public var json = false
    /// cart-add and mix: lines in each connection's cart before the run
    /// (the product added, and this many less one others, a unit each).
    public var cartLines = 1
    public var maximumFrameBytes = Framing.defaultMaximumFrameBytes

    public init() {}

    public static let usage = """
    usage: groser-bench [options]

    Load generator for groserd, shaped like redis-benchmark. Every response is
    checked (status OK, id in order, the method's body); failures are counted
    by status code and never as done.

    options:
      --socket PATH        groserd's socket (default: $GROSER_SOCKET, else the per-user default)
      -c N                 connections (default: 50)
      -P N                 requests in flight per connection, sent with one write
                           and refilled when all of them are answered (default: 1)
      -n N                 total requests (default: 100000)
      -t SECONDS           run for this long instead of -n
      --method NAME        info, cities, get-store, shelf, cart-add, mix or search (default: info)
      --city CODE          get-store, cart-add, mix, search: the city's default store
      --city-uid UID       get-store, cart-add, mix, search: the city's default store, by uid
      --store UID          get-store, cart-add, mix, search: this store
      --product UID        cart-add, mix: the product to add (default: the store's first in stock);
                           every connection adds to a session of its own, one unit a request,
                           so start groserd with a large --max-quantity
      --cart-lines N       cart-add, mix: each connection's cart holds N lines before the run
                           (the product added and N-1 other products in stock, a unit each),
                           so every add changes one line of an N-line cart (default: 1)
      --products           get-store: with every shelf's products
      --write-percent N    mix: this share of the requests, 0 to 100, are cart-add and the
                           rest get-store without products (default: 10); the summary gives
                           reads and writes apart as well as together
      --shelf UID          shelf: this shelf
      --query TEXT         search: a query (repeat for several); each connection sends them in turn,
                           SearchProducts with page size 10
      --queries FILE       search: the queries, one a line (blank lines skipped)
      --threads N          load generator threads (default: 1)
      --warmup SECONDS     run this long first and throw the result away (default: 0)
      --json               print the summary as one JSON object
      --version            print the version and exit
      -h, --help           show this help

    The last line of output is always "rps=N p50_us=N p99_us=N".
    Exit codes: 0 every request succeeded, 1 some failed or the run could not
    start, 2 usage error.
    """

    /// What the command line asks for.
    public enum Parsed: Sendable, Equatable {
        case run(BenchOptions)
        case help
        case version
    }

    /// Parses `arguments` (without the program name).
    public static func parse(_ arguments: [String]) throws(BenchUsageError) -> Parsed {
        var options = BenchOptions()
        var methodName = "info"
        var city: String?, cityUID: String?, store: String?, shelf: String?, product: String?
        var products = false
        var writePercent: Int?
        var queries: [String] = []
        var requests: Int?, seconds: Double?
        var i = 0
        while i < arguments.count {
            var name = arguments[i]
            var inline: String?
            if name.hasPrefix("--"), let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            i += 1
            func value() throws(BenchUsageError) -> String {
                if let inline { return inline }
                guard i < arguments.count else { throw BenchUsageError("\(name) needs a value") }
                defer { i += 1 }
                return arguments[i]
            }
            func count(upTo limit: Int) throws(BenchUsageError) -> Int {
                let text = try value()
                guard let n = Int(text), n >= 1, n <= limit else {
                    throw BenchUsageError("\(name) must be a whole number from 1 to \(limit), not \"\(text)\"")
                }
                return n
            }
            func duration(allowingZero: Bool) throws(BenchUsageError) -> Double {
                let text = try value()
                guard let s = Double(text), s.isFinite, allowingZero ? s >= 0 : s > 0, s <= 86_400 else {
                    throw BenchUsageError("\(name) must be a number of seconds\(allowingZero ? "" : " above 0"), not \"\(text)\"")
                }
                return s
            }
            func percent() throws(BenchUsageError) -> Int {
                let text = try value()
                guard let n = Int(text), n >= 0, n <= 100 else {
                    throw BenchUsageError("\(name) must be a whole number from 0 to 100, not \"\(text)\"")
                }
                return n
            }
            func flag() throws(BenchUsageError) {
                guard inline == nil else { throw BenchUsageError("\(name) takes no value") }
            }
            switch name {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--socket": options.socketPath = try value()
            case "-c", "--connections": options.connections = try count(upTo: 100_000)
            case "-P", "--pipeline": options.pipeline = try count(upTo: 100_000)
            case "-n", "--requests": requests = try count(upTo: Int(Int32.max) * 64)
            case "-t", "--seconds": seconds = try duration(allowingZero: false)
            case "--method": methodName = try value()
            case "--city": city = try value()
            case "--city-uid": cityUID = try value()
            case "--store": store = try value()
            case "--shelf": shelf = try value()
            case "--query": queries.append(try value())
            case "--queries":
                let path = try value()
                guard let bytes = try? Files.read(path) else { throw BenchUsageError("--queries: cannot read \(path)") }
                queries += String(decoding: bytes, as: UTF8.self).split(separator: "\n")
                    .map { String($0) }.filter { !$0.allSatisfy(\.isWhitespace) }
            case "--product": product = try value()
            case "--cart-lines": options.cartLines = try count(upTo: 10_000)
            case "--products": try flag(); products = true
            case "--write-percent": writePercent = try percent()
            case "--threads": options.threads = try count(upTo: 1024)
            case "--warmup": options.warmupSeconds = try duration(allowingZero: true)
            case "--json": try flag(); options.json = true
            case "--max-frame-bytes": options.maximumFrameBytes = try count(upTo: 1 << 30)
            default: throw BenchUsageError("unknown option \"\(arguments[i - 1])\" (see groser-bench --help)")
            }
        }

        switch (requests, seconds) {
        case (.some, .some): throw BenchUsageError("-n and -t cannot both be given")
        case (let n?, nil): options.length = .requests(n)
        case (nil, let s?): options.length = .seconds(s)
        case (nil, nil): break
        }
        if case .requests(let n) = options.length, n < options.connections {
            throw BenchUsageError("-n \(n) is fewer requests than connections (-c \(options.connections))")
        }
        options.threads = min(options.threads, options.connections)

        let selectors = [city.map(StoreSelector.cityCode), cityUID.map(StoreSelector.cityUID),
                         store.map(StoreSelector.storeUID)].compactMap { $0 }
        if !["get-store", "cart-add", "mix", "search"].contains(methodName) && !selectors.isEmpty {
            throw BenchUsageError("--city, --city-uid and --store are for --method get-store, cart-add, mix and search")
        }
        if methodName != "search" && !queries.isEmpty {
            throw BenchUsageError("--query and --queries are for --method search")
        }
        if methodName != "get-store" && products {
            throw BenchUsageError("--products is for --method get-store")
        }
        if methodName != "cart-add" && methodName != "mix" && product != nil {
            throw BenchUsageError("--product is for --method cart-add and mix")
        }
        if methodName != "cart-add" && methodName != "mix" && options.cartLines != 1 {
            throw BenchUsageError("--cart-lines is for --method cart-add and mix")
        }
        if methodName != "mix" && writePercent != nil {
            throw BenchUsageError("--write-percent is for --method mix")
        }
        if methodName != "shelf" && shelf != nil {
            throw BenchUsageError("--shelf is for --method shelf")
        }
        switch methodName {
        case "info": options.method = .serverInfo
        case "cities": options.method = .listCities
        case "get-store":
            guard selectors.count == 1 else {
                throw BenchUsageError("--method get-store needs exactly one of --city, --city-uid or --store")
            }
            options.method = .getStore(selectors[0], includeProducts: products)
        case "shelf":
            guard let shelf else { throw BenchUsageError("--method shelf needs --shelf UID") }
            options.method = .getShelf(uid: shelf)
        case "cart-add":
            guard selectors.count == 1 else {
                throw BenchUsageError("--method cart-add needs exactly one of --city, --city-uid or --store")
            }
            options.method = .cartAdd(selectors[0], productUID: product)
        case "mix":
            guard selectors.count == 1 else {
                throw BenchUsageError("--method mix needs exactly one of --city, --city-uid or --store")
            }
            options.method = .mix(selectors[0], writePercent: writePercent ?? 10, productUID: product)
        case "search":
            guard selectors.count == 1 else {
                throw BenchUsageError("--method search needs exactly one of --city, --city-uid or --store")
            }
            guard !queries.isEmpty else { throw BenchUsageError("--method search needs --query TEXT or --queries FILE") }
            options.method = .search(selectors[0], queries: queries)
        default:
            throw BenchUsageError("--method must be info, cities, get-store, shelf, cart-add, mix or search, not \"\(methodName)\"")
        }
        return .run(options)
    }
}
