import GroserServer
import GroserStorage
import GroserSystem
import GroserWire

/// The fuzz harness's executors: what the event loop and the worker threads
/// do with a request the `Dispatcher` sends them, run on the calling thread
/// so each answer is ready when the call returns. The customer shard and
/// account rules run through `CustomerService.answerNow` (state in memory,
/// rebuilt before each input), SetProduct through `CommerceService` in a
/// transaction that is rolled back; the harness runs no import thread.
struct FuzzExecutors: Executors {
    unowned let harness: FuzzHarness

    /// Watch, CancelWatch and Stats, as the event loop answers them. A
    /// cancel's extra frame (the stream's CANCELLED end) is checked here and
    /// left out, so the answer checked is the CancelWatch's own.
    func answerOnLoop(_ request: Request, into out: inout [UInt8]) {
        switch request.method {
        case .watch(let selector, let since):
            _ = WatchRequests.start(id: request.id, selector: selector, since: since, catalog: harness.catalog,
                                    hub: harness.watches, watchers: &harness.watchers, into: &out)
        case .cancelWatch(let watchID):
            var end: [UInt8] = []
            if WatchRequests.cancel(id: request.id, watchID: watchID, watchers: &harness.watchers, streamEnd: &end, into: &out) != nil {
                let ending = (try? Response.decode(end.dropFirst(Framing.headerSize)))
                precondition(ending?.id == watchID && ending?.status.code == .cancelled && ending?.continues == false,
                             "a cancelled watch must end with CANCELLED and no continues")
            }
        case .stats:
            ResponseFrameWriter.appendOK(id: request.id, field: .stats, body: BodyEncoder.stats(ServerStats()), to: &out)
        default:
            break
        }
    }

    func runInShard(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                    into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        answered(request.id, harness.customers.answerNow(request, caller: FuzzHarness.caller(request.id)), &out)
    }

    func runInAccountWorkers(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        answered(request.id, harness.customers.answerNow(request, caller: FuzzHarness.caller(request.id)), &out)
    }

    /// In its own savepoint, as the commit queue runs it.
    func runInCommitQueue(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                          into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        let caller = FuzzHarness.caller(request.id)
        let outcome: CommerceOutcome
        do {
            outcome = try harness.store.rollingBack.write { [harness, request] (tx) throws(StorageError) in
                try harness.commerce.execute(request.method, caller: caller, in: tx)
            }.outcome
        } catch {
            harness.storeFailure = error
            outcome = .failed(Status(.unavailable, "The store failed: \(error)."))
        }
        return answered(request.id, outcome, &out)
    }

    func runInImportThread(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                           into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        answered(request.id, .failed(Status(.unimplemented, "The fuzz harness runs no import thread.")), &out)
    }

    private func answered(_ id: UInt64, _ outcome: CommerceOutcome, _ out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        switch outcome {
        case .ok(let field, let body): ResponseFrameWriter.appendOK(id: id, field: field, body: body, to: &out)
        case .failed(let status): ResponseFrameWriter.appendStatus(id: id, status: status, to: &out)
        }
        return .answered
    }
}

/// The fuzz harness's customer store: the one known session at every load,
/// and appends accepted and forgotten, so each input starts from it.
final class SeededCustomerStore: CustomerStore {
    let session: SessionKey
    let createdAtUnix: Int64
    init(session: SessionKey, createdAtUnix: Int64) {
        self.session = session
        self.createdAtUnix = createdAtUnix
    }
    func load(into state: inout CustomerState) throws(StorageError) -> String {
        state.apply(.session(session, createdAtUnix: createdAtUnix))
        return "one seeded session"
    }
    func append(_ records: [CustomerRecord]) throws(StorageError) {}
    func checkpointDue() throws(StorageError) -> Bool { false }
    func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int { 1 }
}
