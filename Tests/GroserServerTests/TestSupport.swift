import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

let imageBase = "http://img.example:8080"
let catalogVersion: UInt64 = 7
let sample = SampleCatalog.make()
let encodedSample = EncodedCatalog(catalog: sample, version: catalogVersion, imageBaseURL: imageBase,
                                   serverVersion: ProtocolInfo.serverVersion)

/// A label for a test case, so the table's rows are told apart in reports.
struct Labeled<Value: Sendable>: Sendable, CustomTestStringConvertible {
    var label: String
    var value: Value
    init(_ label: String, _ value: Value) { self.label = label; self.value = value }
    var testDescription: String { label }
}

struct Deferred: Error {}

/// Splits a response buffer into frames and decodes each; nothing may be left over.
func responses(in out: [UInt8]) throws -> [Response] {
    var decoder = FrameDecoder(maximumFrameBytes: Int(UInt32.max))
    decoder.append(out)
    var result: [Response] = []
    while let frame = try decoder.next() { result.append(try Response.decode(frame)) }
    #expect(decoder.bufferedByteCount == 0, "a partial frame was left in the output")
    return result
}

/// Executors that answer nothing: the dispatcher's sends are only recorded.
final class RecordingExecutors: Executors {
    private(set) var sent: [(executor: MethodInfo.Executor, request: Request)] = []
    func answerOnLoop(_ request: Request, into out: inout [UInt8]) { sent.append((.eventLoop, request)) }
    func runInShard(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        record(.customerShard, request)
    }
    func runInAccountWorkers(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        record(.accountWorkers, request)
    }
    func runInCommitQueue(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        record(.commitQueue, request)
    }
    func runInImportThread(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        record(.importThread, request)
    }
    private func record(_ executor: MethodInfo.Executor, _ request: Request) -> ConnectionStateMachine.Answered {
        sent.append((executor, request))
        return .awaiting
    }
}

/// What became of a request given to the dispatcher.
enum Handled {
    /// Answered into the buffer.
    case answered
    /// Sent to an executor other than the catalog reader.
    case sent(MethodInfo.Executor)
}

extension RequestHandler {
    /// Dispatches one frame body through a `Dispatcher` over this handler.
    func respond(toFrame body: UnsafeRawBufferPointer, receivedAt: UInt64, peerIsOperator: () -> Bool,
                 into out: inout [UInt8]) -> Handled {
        let executors = RecordingExecutors()
        _ = Dispatcher(handler: self).dispatch(frame: body, receivedAt: receivedAt, slot: 1, peerIsOperator: peerIsOperator,
                                               to: executors, into: &out)
        return executors.sent.first.map { .sent($0.executor) } ?? .answered
    }

    /// Dispatches one decoded request through a `Dispatcher` over this handler.
    func respond(to request: Request, receivedAt: UInt64, into out: inout [UInt8]) -> Handled {
        let executors = RecordingExecutors()
        _ = Dispatcher(handler: self).dispatch(request, receivedAt: receivedAt, slot: 1, to: executors, into: &out)
        return executors.sent.first.map { .sent($0.executor) } ?? .answered
    }
}

/// The handler's only response to one frame body.
func respond(toFrame body: [UInt8], handler: RequestHandler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds()),
             receivedAt: UInt64 = monotonicNanoseconds(), peerIsOperator: Bool = true) throws -> Response {
    var out: [UInt8] = []
    let handled = body.withUnsafeBytes { handler.respond(toFrame: $0, receivedAt: receivedAt, peerIsOperator: { peerIsOperator }, into: &out) }
    guard case .answered = handled else {
        Issue.record("the request was deferred instead of answered")
        throw Deferred()
    }
    let all = try responses(in: out)
    try #require(all.count == 1, "expected exactly one response frame, got \(all.count)")
    return all[0]
}

/// The handler's response to `request`, sent as the client sends it: encoded in a frame.
func call(_ request: Request, handler: RequestHandler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds()),
          receivedAt: UInt64 = monotonicNanoseconds()) throws -> Response {
    try respond(toFrame: request.encoded(), handler: handler, receivedAt: receivedAt)
}

extension Response {
    var storeCatalog: StoreCatalog? { if case .getStore(let v) = body { v } else { nil } }
    var shelfContents: ShelfContents? { if case .getShelf(let v) = body { v } else { nil } }
    var cityList: CityList? { if case .listCities(let v) = body { v } else { nil } }
    var serverInfo: ServerInfo? { if case .serverInfo(let v) = body { v } else { nil } }
}

/// `store` as the daemon serves it: image URLs absolute under `base`.
func withAbsoluteImages(_ store: Store, base: String = imageBase) -> Store {
    var store = store
    for d in store.departments.indices {
        for h in store.departments[d].shelves.indices {
            for p in store.departments[d].shelves[h].products.indices {
                let url = store.departments[d].shelves[h].products[p].imageURL
                store.departments[d].shelves[h].products[p].imageURL = base + url
            }
        }
    }
    return store
}

/// `store` without products, as GetStore answers without include_products.
func withoutProducts(_ store: Store) -> Store {
    var store = store
    for d in store.departments.indices {
        for h in store.departments[d].shelves.indices { store.departments[d].shelves[h].products = [] }
    }
    return store
}

func city(code: String) -> City { sample.cities.first { $0.code == code }! }

extension String {
    func occurrences(of needle: String) -> Int {
        var count = 0
        var rest = self[...]
        while let r = rest.firstRange(of: needle) {
            count += 1
            rest = rest[r.upperBound...]
        }
        return count
    }

    /// Code-point order, as the protocol documents products are sorted.
    func precedesByCodePoint(_ other: String) -> Bool {
        unicodeScalars.lexicographicallyPrecedes(other.unicodeScalars)
    }
}
