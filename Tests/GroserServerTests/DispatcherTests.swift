import GroserServer
import GroserSystem
import GroserWire
import Testing

/// The dispatcher without a socket: every method goes to the executor the
/// registry names, after the id and deadline checks.
@Suite("the dispatcher")
struct DispatcherTests {
    static let session = "0123456789abcdef0123456789abcdef"
    /// One request of each executor's methods, and more.
    static let samples: [RequestMethod] = [
        .serverInfo, .listCities, .getStore(selector: .cityCode("SPB"), includeProducts: false),
        .getShelf(shelfUID: "x", knownStoreVersion: 0), .stats, .cancelWatch(watchID: 1),
        .watch(selector: .cityCode("SPB"), sinceVersion: 0), .whoAmI(session: session), .logout(session: session),
        .listOrders(session: session), .openSession, .getCart(session: session, storeUID: "store-spb-1"),
        .setProduct(ProductUpdate(productUID: "p")), .register(Registration(email: "a@b.co", password: "correct horse", name: "A")),
        .login(LoginDetails(email: "a@b.co", password: "correct horse")),
        .importCatalog(ImportChunk(importID: 0, records: [])), .exportCatalog(ExportPageRequest()),
    ]

    static func dispatch(_ request: Request, receivedAt: UInt64 = monotonicNanoseconds())
        -> (answered: ConnectionStateMachine.Answered, out: [UInt8], sent: [(executor: MethodInfo.Executor, request: Request)]) {
        let executors = RecordingExecutors()
        var out: [UInt8] = []
        let answered = Dispatcher(handler: RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds()))
            .dispatch(request, receivedAt: receivedAt, slot: 1, to: executors, into: &out)
        return (answered, out, executors.sent)
    }

    @Test(arguments: samples)
    func eachMethodGoesWhereTheRegistrySays(_ method: RequestMethod) throws {
        let info = try #require(method.field?.info)
        let (answered, out, sent) = Self.dispatch(Request(id: 5, method: method))
        switch info.executor {
        case .catalogReader:
            #expect(sent.isEmpty && answered == .answered)
            #expect(try responses(in: out).map(\.id) == [5])
        case .eventLoop:
            #expect(sent.map(\.executor) == [.eventLoop] && answered == .answered)
        default:
            #expect(sent.map(\.executor) == [info.executor] && answered == .awaiting && out.isEmpty)
            #expect(sent.first?.request == Request(id: 5, method: method), "the request arrives as it was read")
        }
    }

    @Test(arguments: samples)
    func aRequestWithID0OrPastItsDeadlineGoesNowhere(_ method: RequestMethod) throws {
        let zero = Self.dispatch(Request(id: 0, method: method))
        #expect(zero.sent.isEmpty && zero.answered == .answered)
        #expect(try responses(in: zero.out).map(\.status.code) == [.invalidArgument])
        let late = Self.dispatch(Request(id: 9, deadlineMilliseconds: 1, method: method), receivedAt: monotonicNanoseconds() - 1_000_000_000)
        #expect(late.sent.isEmpty && late.answered == .answered)
        let answer = try #require(try responses(in: late.out).first)
        #expect(answer.id == 9 && answer.status == Status(.deadlineExceeded, "The request's deadline of 1 ms passed before it was served."))
    }

    @Test func theDeadlineRefusalIsNilUntilTheDeadlinePasses() {
        let now = monotonicNanoseconds()
        #expect(Dispatcher.deadlineRefusal(Request(id: 1, method: .listCities), receivedAt: now - 10_000_000_000) == nil, "no deadline")
        #expect(Dispatcher.deadlineRefusal(Request(id: 1, deadlineMilliseconds: 60_000, method: .listCities), receivedAt: now) == nil)
        let late = Request(id: 1, deadlineMilliseconds: 5, method: .listCities)
        #expect(Dispatcher.deadlineRefusal(late, receivedAt: now - 10_000_000)?.message == "The request's deadline of 5 ms passed before it was served.")
        #expect(Dispatcher.deadlineRefusal(late, receivedAt: now - 10_000_000, wording: .brief)
                == Status(.deadlineExceeded, "The request's deadline passed before it was served."))
    }

    /// Behind an owed answer: a worker's request is sent on at once; a read,
    /// a loop method or id 0 waits its turn.
    @Test func aHeldWorkersRequestIsSentNowAndTheRestWait() {
        let dispatcher = Dispatcher(handler: RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds()))
        for method in Self.samples {
            let executors = RecordingExecutors()
            let held = dispatcher.hold(Request(id: 3, method: method), receivedAt: monotonicNanoseconds(), slot: 2, to: executors)
            let deferred = method.field?.info.isDeferred == true
            if case .awaiting = held { #expect(deferred, "\(method)") } else if case .later = held { #expect(!deferred, "\(method)") } else {
                Issue.record("\(method) was answered at once")
            }
            #expect(executors.sent.count == (deferred ? 1 : 0))
            let zero = dispatcher.hold(Request(id: 0, method: method), receivedAt: monotonicNanoseconds(), slot: 2, to: executors)
            guard case .later = zero else { Issue.record("\(method) with id 0 was not left for its turn"); continue }
        }
    }
}
