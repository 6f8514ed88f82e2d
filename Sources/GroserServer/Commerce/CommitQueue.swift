import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// A commerce request on its way to the store, with where its answer goes.
struct CommerceJob: Sendable {
    let request: Request
    let caller: Caller
    let receivedAt: UInt64
    /// Called on the commit thread with the whole response frame, after the
    /// transaction that holds the request's change has committed.
    let reply: @Sendable ([UInt8]) -> Void
    /// Closed when the connection that sent the request is gone; the request
    /// is then skipped, since nobody can receive its answer.
    var connection: ConnectionToken? = nil
}

/// Tells the commit thread that a connection has closed, so the requests it
/// left queued cost nothing: without it a client that pipelines requests and
/// disconnects, again and again, queues work without bound.
final class ConnectionToken: Sendable {
    private let closed = Atomic<Bool>(false)
    init() {}
    func close() { closed.store(true, ordering: .releasing) }
    var isClosed: Bool { closed.load(ordering: .acquiring) }
}

/// One thread that runs commerce requests against the store with group
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
    func submit(_ job: CommerceJob) -> Bool { queue.put(job) }

    /// Stops the thread after the batch it is running. Jobs still queued are
    /// dropped unexecuted: the event loops have stopped, so their clients saw
    /// the connection close without an answer, which PROTOCOL.md §10 promises
    /// means "not executed, safe to retry".
    func stop() {
        let dropped = queue.closeAndTakeAll()
        thread.join()
        if !dropped.isEmpty {
            logger.warning("dropped \(dropped.count) queued request(s) at shutdown; their clients got no answer")
        }
    }

    private func run() {
        while true {
            let batch = queue.take(upTo: Self.batchLimit)
            if batch.isEmpty { return }
            commit(batch)
        }
    }

    private func commit(_ batch: [CommerceJob]) {
        let started = monotonicNanoseconds()
        defer {
            logger.debug("committed \(batch.count) request(s) in \((monotonicNanoseconds() - started) / 1000) µs")
        }
        // nil: not run (yet). `settled`: needs no answer from here, because
        // it was answered already (deadline passed) or its connection is gone.
        var outcomes = [CommerceOutcome?](repeating: nil, count: batch.count)
        var settled = [Bool](repeating: false, count: batch.count)
        for (i, job) in batch.enumerated() where job.connection?.isClosed == true { settled[i] = true }
        if settled.allSatisfy({ $0 }) { return }
        var catalogChanged = false
        do {
            try store.write { (tx) throws(StorageError) in
                for (i, job) in batch.enumerated() where !settled[i] {
                    var expired: [UInt8] = []
                    if RequestHandler.expired(job.request, receivedAt: job.receivedAt, into: &expired) {
                        settled[i] = true
                        job.reply(expired)
                        continue
                    }
                    try tx.savepoint()
                    let (outcome, changed) = service.execute(job.request.method, caller: job.caller, in: tx)
                    if case .failed = outcome {
                        try tx.rollbackToSavepoint()
                    } else {
                        try tx.releaseSavepoint()
                        catalogChanged = catalogChanged || changed
                    }
                    outcomes[i] = outcome
                }
            }
        } catch {
            logger.error("commit of \(batch.count) request(s) failed: \(error)")
            let failed = CommerceOutcome.failed(Status(.unavailable, "The change could not be saved (\(error.description)); nothing was changed."))
            // Every request of the batch gets this answer, including those
            // the failure stopped before they ran: each must get one answer.
            for i in outcomes.indices where !settled[i] { outcomes[i] = failed }
            catalogChanged = false
        }
        if catalogChanged {
            do { try catalog.refresh() } catch { logger.error("cannot reload the catalog after a change: \(error)") }
        }
        for (job, outcome) in zip(batch, outcomes) {
            guard let outcome else { continue }
            var frame: [UInt8] = []
            switch outcome {
            case .ok(let field, let body): ResponseFrameWriter.appendOK(id: job.request.id, field: field, body: body, to: &frame)
            case .failed(let status): ResponseFrameWriter.appendStatus(id: job.request.id, status: status, to: &frame)
            }
            job.reply(frame)
        }
    }
}

/// Holds the commit thread once started.
private final class ThreadBox: @unchecked Sendable {
    // @unchecked: set once by `start` before any `join`, on the same thread.
    private var thread: OSThread?
    func set(_ t: OSThread) { thread = t }
    func join() { thread?.join(); thread = nil }
}
