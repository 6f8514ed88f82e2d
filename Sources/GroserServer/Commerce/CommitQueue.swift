import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// A commerce request on its way to the store, with where its answer goes.
struct CommerceJob: Sendable {
    let request: Request
    let caller: Caller
    let receivedAt: UInt64
    /// Called on the worker's thread with the whole response frame, once
    /// the request's change is durable.
    let reply: Reply
    /// Closed when the connection that sent the request is gone; the request
    /// is then skipped, since nobody can receive its answer.
    var connection: ConnectionToken? = nil

    init(request: Request, caller: Caller, receivedAt: UInt64, reply: Reply, connection: ConnectionToken? = nil) {
        self.request = request
        self.caller = caller
        self.receivedAt = receivedAt
        self.reply = reply
        self.connection = connection
    }

    /// A job whose answer goes to `reply` (tests, and callers that wait).
    init(request: Request, caller: Caller, receivedAt: UInt64, connection: ConnectionToken? = nil,
         reply: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(request: request, caller: caller, receivedAt: receivedAt, reply: .call(reply), connection: connection)
    }

    /// Where a job's answer goes: an event loop's inbox, addressed by value
    /// (a closure capturing the address was an allocation per request), or
    /// a function.
    enum Reply: Sendable {
        case inbox(CommitInbox, CommitInbox.Address)
        case call(@Sendable ([UInt8]) -> Void)

        func callAsFunction(_ frame: [UInt8]) { self(FrameRun(frame)) }

        /// A frame written among others in one array: the loop keeps the
        /// run (the array is shared, not copied; once the loop holds no run
        /// of it, its shard writes the next batch into it, `FrameScratch`).
        /// `status`, when given, is the frame's (the loop's Stats need not read it back).
        func callAsFunction(_ frame: FrameRun, status: StatusCode? = nil) {
            switch self {
            case .inbox(let inbox, let address): inbox.post(frame, status: status, to: address)
            case .call(let f): f(frame.bytes)
            }
        }
    }
}

/// Tells the commit thread that a connection has closed, so the requests it
/// left queued cost nothing: without it a client that pipelines cart
/// requests and disconnects, again and again, queues work without bound
/// (tools/torture: 2 GB resident in 20 s).
final class ConnectionToken: Sendable {
    private let closed = Atomic<Bool>(false)
    init() {}
    func close() { closed.store(true, ordering: .releasing) }
    var isClosed: Bool { closed.load(ordering: .acquiring) }
}

/// One thread that runs catalog changes (SetProduct) against the store with group
/// commit: every request waiting when a transaction starts joins it, each
/// in its own savepoint, and no answer leaves before the commit returns.
final class CommitQueue: Sendable {
    private let queue = BlockingQueue<CommerceJob>()
    private let store: any CommerceStore
    private let service: CommerceService
    private let catalog: CatalogService
    private let logger: Logger
    private let thread = ThreadBox()

    /// The most requests one transaction takes.
    static let batchLimit = 512

    init(store: any CommerceStore, service: CommerceService, catalog: CatalogService, logger: Logger) {
        self.store = store
        self.service = service
        self.catalog = catalog
        self.logger = logger
    }

    func start() throws(Errno) {
        thread.set(try OSThread(name: "groserd-commit") { [self] in run() })
    }

    /// Queues a job; false when the queue is stopping.
    func submit(_ job: consuming CommerceJob) -> Bool { queue.put(job) }

    /// Stops the thread once the batch in progress is committed. Called after
    /// the event loops stopped: nobody waits for the jobs still queued, so
    /// they are dropped unanswered (and unapplied) rather than delaying exit.
    func stop() {
        dropping.store(true, ordering: .releasing)
        queue.close()
        thread.join()
    }

    private let dropping = Atomic<Bool>(false)

    private func run() {
        while true {
            let batch = queue.take(upTo: Self.batchLimit)
            if batch.isEmpty { return }
            if dropping.load(ordering: .acquiring) {
                logger.info("dropped \(batch.count) unanswered cart request(s) at shutdown")
                continue
            }
            let wanted = batch.filter { $0.connection?.isClosed != true }
            if wanted.count < batch.count {
                logger.debug("skipped \(batch.count - wanted.count) cart request(s) of closed connections")
            }
            if !wanted.isEmpty { commit(wanted) }
        }
    }

    private func commit(_ batch: [CommerceJob]) {
        let started = monotonicNanoseconds()
        defer {
            logger.debug("committed \(batch.count) request(s) in \((monotonicNanoseconds() - started) / 1000) µs")
        }
        // nil: not reached (yet). Every job gets exactly one answer below.
        var outcomes = [CommerceOutcome?](repeating: nil, count: batch.count)
        var catalogChanged = false
        do {
            try store.write { (tx) throws(StorageError) in
                for (i, job) in batch.enumerated() {
                    if let refusal = Dispatcher.deadlineRefusal(job.request, receivedAt: job.receivedAt, wording: .brief) {
                        outcomes[i] = .failed(refusal)
                        continue
                    }
                    // Each request in its own savepoint: a refusal rolls back alone.
                    let (outcome, changed) = try service.execute(job.request.method, caller: job.caller, in: tx)
                    catalogChanged = catalogChanged || changed
                    outcomes[i] = outcome
                }
            }
        } catch {
            // The transaction rolled back: no change of this batch happened.
            logger.error("commit of \(batch.count) request(s) failed: \(error)")
            let failed = CommerceOutcome.failed(Status(.unavailable, "The change could not be saved (\(error.description)); nothing was changed."))
            for i in outcomes.indices {
                switch outcomes[i] {
                case nil, .ok?: outcomes[i] = failed
                case .failed?: break
                }
            }
            catalogChanged = false
        }
        if catalogChanged {
            // Readers see the change before its answer leaves; watchers
            // hear of it after (below), so no watch frame overtakes it.
            do { try catalog.refresh(announce: false) } catch { logger.error("cannot reload the catalog after a change: \(error)") }
        }
        for (job, outcome) in zip(batch, outcomes) {
            guard let outcome else { continue }  // unreachable: every slot was filled above
            var frame: [UInt8] = []
            switch outcome {
            case .ok(let field, let body): ResponseFrameWriter.appendOK(id: job.request.id, field: field, body: body, to: &frame)
            case .failed(let status): ResponseFrameWriter.appendStatus(id: job.request.id, status: status, to: &frame)
            }
            job.reply(frame)
        }
        if catalogChanged { catalog.announce() }
    }
}

/// Holds the commit thread once started.
private final class ThreadBox: @unchecked Sendable {
    // @unchecked: set once by `start` before any `join`, on the same thread.
    private var thread: OSThread?
    func set(_ t: OSThread) { thread = t }
    func join() { thread?.join(); thread = nil }
}
