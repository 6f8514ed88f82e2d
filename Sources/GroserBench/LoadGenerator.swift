import GroserClient
import GroserSystem
import GroserWire
import Synchronization

/// Runs the load: connects every connection, starts the threads, and waits.
public enum LoadGenerator {
    /// Each connection's request frames, one per kind of `options.method`:
    /// the same for every connection, except cart-add's (a mix's write),
    /// where every connection gets a session of its own (opened here).
    static func requestFrames(_ options: BenchOptions) throws(BenchError) -> [[RequestFrame]] {
        var perKind: [[RequestFrame]] = []
        for kind in options.method.kinds {
            if case .search(let selector, let queries) = kind {
                let all = queries.map { RequestFrame(requestMethod: .searchProducts(SearchRequest(selector: selector, query: $0, pageSize: 10))) }
                return Array(repeating: all, count: options.connections)
            }
            if case .cartAdd(let selector, let named) = kind {
                perKind.append(try cartAddFrames(selector, product: named, options))
            } else {
                perKind.append(Array(repeating: RequestFrame(method: kind), count: options.connections))
            }
        }
        return (0..<options.connections).map { i in perKind.map { $0[i] } }
    }

    /// A cart-add frame per connection, each in a session of its own.
    private static func cartAddFrames(_ selector: StoreSelector, product named: String?,
                                      _ options: BenchOptions) throws(BenchError) -> [RequestFrame] {
        let client = GroserClient(location: benchLocation(options), timeout: 10)
        defer { client.close() }
        do {
            let catalog = try client.store(selector, includeProducts: named == nil || options.cartLines > 1)
            let inStock = catalog.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }.map(\.uid)
            guard let product = named ?? inStock.first else {
                throw BenchError("the store \(catalog.store.uid) has no product in stock to add")
            }
            // The cart's other lines, added before the run.
            let others = inStock.filter { $0 != product }.prefix(options.cartLines - 1)
            guard others.count == options.cartLines - 1 else {
                throw BenchError("--cart-lines \(options.cartLines): the store \(catalog.store.uid) has only \(others.count + 1) products in stock")
            }
            var frames: [RequestFrame] = []
            for _ in 0..<options.connections {
                let session = try client.openSession()
                let cart = CartMutation(session: session, storeUID: catalog.store.uid)
                for uid in others { _ = try client.addItem(cart, productUID: uid, quantity: 1) }
                frames.append(RequestFrame(requestMethod: .addItem(cart, productUID: product, quantity: 1)))
            }
            return frames
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("cannot prepare cart-add: \(error)")
        }
    }

    /// `progress` is called on the calling thread about every 250 ms with
    /// the requests answered so far and the seconds since the start.
    public static func run(_ options: BenchOptions, progress: ((UInt64, Double) -> Void)? = nil) throws(BenchError) -> BenchResult {
        let frames = try requestFrames(options)
        let threadCount = max(1, min(options.threads, options.connections))
        var perConnection: [Int] = []
        switch options.length {
        case .requests(let n):
            for i in 0..<options.connections {
                perConnection.append(n / options.connections + (i < n % options.connections ? 1 : 0))
            }
        case .seconds:
            perConnection = Array(repeating: Int.max, count: options.connections)
        }

        var sockets: [Socket] = []
        for _ in 0..<options.connections {
            do {
                // Checked as groser-client checks: the directory and who answers.
                let socket = try GroserClient.connect(to: benchLocation(options))
                do { try socket.setNonBlocking(true) } catch {
                    socket.close()
                    throw GroserError.cannotConnect(path: options.socketPath, errno: error)
                }
                sockets.append(socket)
            } catch {
                for s in sockets { s.close() }
                throw BenchError("\(error)")
            }
        }

        let start = monotonicNanoseconds()
        let stopSendingAt: UInt64
        if case .seconds(let s) = options.length { stopSendingAt = start + UInt64(s * 1e9) } else { stopSendingAt = .max }
        var workers: [BenchWorker] = []
        do {
            for _ in 0..<threadCount { workers.append(try BenchWorker(options: options, stopSendingAt: stopSendingAt)) }
            for (i, socket) in sockets.enumerated() {
                var writePercent = 0
                if case .mix(_, let percent, _) = options.method { writePercent = percent }
                var cycle = false
                if case .search = options.method { cycle = true }
                try workers[i % threadCount].add(BenchConnection(socket: socket, frames: frames[i], writePercent: writePercent,
                                                                 phase: i, pipeline: options.pipeline,
                                                                 requests: perConnection[i], cycle: cycle))
            }
        } catch {
            throw BenchError("cannot set up epoll: \(error)")
        }
        var threads: [OSThread] = []
        for (i, worker) in workers.enumerated() {
            do {
                threads.append(try OSThread(name: "bench\(i)") { worker.run() })
            } catch {
                // The workers that started still finish their share.
                for t in threads { t.join() }
                throw BenchError("cannot start a thread: \(error)")
            }
        }
        if let progress {
            while !workers.allSatisfy({ $0.done.load(ordering: .acquiring) }) {
                OSThread.sleep(milliseconds: 250)
                let answered = workers.reduce(0) { $0 + UInt64($1.answered.load(ordering: .relaxed)) }
                progress(answered, Double(monotonicNanoseconds() - start) / 1e9)
            }
        }
        for t in threads { t.join() }

        var tally = BenchTally()
        var kindTallies = options.method.kindNames.map { _ in BenchTally() }
        var end = start
        for w in workers {
            tally.merge(w.tally)
            for k in kindTallies.indices { kindTallies[k].merge(w.kindTallies[k]) }
            end = max(end, w.finishedAt)
        }
        let kinds = options.method.kinds
        let parts = zip(options.method.kindNames, kindTallies).enumerated().map { k, named in
            BenchPart(name: named.0, method: kinds[k], tally: named.1)
        }
        return BenchResult(options: options, seconds: Double(end - start) / 1e9, tally: tally, parts: parts)
    }
}

/// The socket as groser-client would see it: the per-user default (its
/// directory checked) when --socket names that path, else the named path;
/// with $GROSER_SERVER_UID as the expected server uid either way.
func benchLocation(_ options: BenchOptions) -> SocketLocation {
    let environment = SocketLocation.fromEnvironment()
    if options.socketPath == environment.path { return environment }
    return SocketLocation(path: options.socketPath, isExplicit: true, expectedServerUID: environment.expectedServerUID)
}

/// One kind of request of a mix ("reads", "writes"), counted apart.
public struct BenchPart: Sendable {
    public var name: String
    public var method: BenchMethod
    public var tally: BenchTally

    public init(name: String, method: BenchMethod, tally: BenchTally) {
        self.name = name
        self.method = method
        self.tally = tally
    }
}

/// The outcome of one run.
public struct BenchResult: Sendable {
    public var options: BenchOptions
    public var seconds: Double
    /// Every request, whatever its kind.
    public var tally: BenchTally
    /// A mix's kinds, each counted apart; empty for a single method.
    public var parts: [BenchPart]

    public init(options: BenchOptions, seconds: Double, tally: BenchTally, parts: [BenchPart] = []) {
        self.options = options
        self.seconds = seconds
        self.tally = tally
        self.parts = parts
    }

    /// Successful requests per second; failed requests are not counted.
    public var requestsPerSecond: Double { rate(of: tally) }

    /// `tally`'s successful requests per second of the whole run.
    public func rate(of tally: BenchTally) -> Double { seconds > 0 ? Double(tally.succeeded) / seconds : 0 }
}

/// Why a run could not start.
public struct BenchError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
