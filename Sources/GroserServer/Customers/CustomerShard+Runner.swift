import GroserStorage
import GroserSystem
import GroserWire

/// The shard's thread: it gathers the waiting requests into a batch, runs
/// the batch through its durability (CustomerShard+Durability), and sends
/// every answer only once the batch is durable.
extension CustomerShard {
    static let batchLimit = 1024

    /// How long a shard waits for the clients it just answered to send
    /// again before it starts the next batch (PostgreSQL's commit_delay):
    /// without it, the requests that arrived during one fdatasync went
    /// alone into the next, and at c=50 P=1 every client waited for two
    /// fdatasyncs per request (batches alternating between about 4 and 21).
    static let gatherNanoseconds: UInt64 = 150_000

    func run() {
        var answered = 0
        while true {
            if answered > 1 { queue.wait(forAtLeast: answered, timeoutNanoseconds: Self.gatherNanoseconds) }
            let jobs = queue.take(upTo: Self.batchLimit, timeoutNanoseconds: 1_000_000_000)
            answered = jobs.count
            if jobs.isEmpty {
                if queue.isClosed { return }
                sweepIfDue()
                continue
            }
            if stopFlag.withLock({ $0 }) {
                context.logger.info("dropped \(jobs.count) unanswered cart request(s) at shutdown")
                continue
            }
            // Filtered only when needed: the filter copies every job.
            // By index: `contains(where:)` handed its closure a copy of each job.
            let closed = jobs.withUnsafeBufferPointer { b in b.indices.contains { b[$0].job.connection?.isClosed == true } }
            if closed {
                let wanted = jobs.filter { $0.job.connection?.isClosed != true }
                if !wanted.isEmpty { process(wanted, bodiesWanted: false) }
            } else {
                process(jobs, bodiesWanted: false)
            }
            // Its jobs are destroyed now, on this thread; its room is used again.
            queue.recycle(consume jobs)
            sweepIfDue()
        }
    }

    @discardableResult
    func process(_ jobs: [ShardJob], bodiesWanted: Bool = true) -> [CommerceOutcome] {
        // (Read by `mutate`; see `bodiesWanted`.)
        self.bodiesWanted = bodiesWanted
        // Through the buffer: `jobs[i]` of an Array copied the whole job
        // (and destroyed it) at each use; a buffer's element is borrowed.
        return jobs.withUnsafeBufferPointer { process($0) }
    }

    private func process(_ jobs: UnsafeBufferPointer<ShardJob>) -> [CommerceOutcome] {
        let started = monotonicNanoseconds()
        for change in changes.withLock({ c in defer { c.removeAll() }; return c }) { cache.apply(change) }
        let catalog = context.catalog.current
        let now = context.unixTime()
        // The last batch's arrays, emptied, their room kept: a cart change
        // makes a record and an undo entry (more with an idempotency key).
        var batch = Batch()
        swap(&batch, &spareBatch)
        batch.records.reserveCapacity(jobs.count)
        batch.undo.reserveCapacity(jobs.count)
        defer {
            batch.clear()
            if batch.records.capacity <= Self.batchLimit * 2 && batch.undo.capacity <= Self.batchLimit * 2 { spareBatch = batch }
        }
        // The outcomes, the side answers and the frames' places go into the
        // last batch's arrays too: at one request a batch (P=1) each was
        // an allocation a request. (The outcomes are returned as well; the
        // thread's loop drops them before the next batch empties them.)
        var outcomes: [CommerceOutcome] = []
        swap(&outcomes, &spareOutcomes)
        outcomes.removeAll(keepingCapacity: true)
        outcomes.reserveCapacity(jobs.count)
        var sides: [SideAnswer?] = []
        swap(&sides, &spareSides)
        sides.reserveCapacity(jobs.count)
        defer {
            sides.removeAll(keepingCapacity: sides.capacity <= Self.batchLimit * 2)
            spareSides = sides
            if outcomes.capacity <= Self.batchLimit * 2 { spareOutcomes = outcomes }
        }
        if let shared {
            runShared(jobs, shared, catalog, now, &batch, &outcomes, &sides)
        } else {
            runLogged(jobs, catalog, now, &batch, &outcomes, &sides)
        }
        readThrough(nil)
        // Every request's session was used, answered or refused; a run of
        // one session's requests (a pipelining client) sets it once.
        var last: SessionKey?
        for i in jobs.indices {
            guard let key = jobs[i].key, key != last else { continue }
            last = key
            // In place (the dictionary's optional-chained setter cost about
            // 1,700 instructions per session under callgrind).
            withSession(key) { $0.lastActiveUnix = now }
        }
        if batch.soldOut {
            // Watchers hear of the sold-out product after the answers are queued.
            do { try context.catalog.refresh(announce: false) } catch { context.logger.error("cannot update the catalog after a checkout: \(error)") }
        }
        // Every answer of the batch is written into the shard's frames
        // first, then they leave in one array, each answer a run of it.
        var placed: [Range<Int>] = []
        swap(&placed, &sparePlaces)
        defer {
            placed.removeAll(keepingCapacity: placed.capacity <= Self.batchLimit * 2)
            sparePlaces = placed
        }
        placed.reserveCapacity(jobs.count)
        for i in jobs.indices {
            guard jobs[i].step == nil else { placed.append(0..<0); continue }
            if case .ok = outcomes[i], case .frame(let range)? = sides[i] {
                placed.append(range)
                continue
            }
            let id = jobs[i].job.request.id
            var frame: [UInt8] = []
            switch outcomes[i] {
            case .ok(let field, let body): ResponseFrameWriter.appendOK(id: id, field: field, body: body, to: &frame)
            case .failed(let status): ResponseFrameWriter.appendStatus(id: id, status: status, to: &frame)
            }
            placed.append(self.frames.append(frame))
        }
        let frames = self.frames.take()
        for i in jobs.indices {
            let outcome = outcomes[i]
            if let call = jobs[i].step {
                switch outcome {
                case .ok:
                    guard case .step(let answer)? = sides[i].take() else {
                        call.done(.failed(Status(.internal, "An account step gave no answer.")))
                        continue
                    }
                    call.done(.answer(answer))
                case .failed(let status): call.done(.failed(status))
                }
                continue
            }
            let status: StatusCode
            switch outcome {
            case .ok: status = .ok
            case .failed(let s): status = s.code
            }
            jobs[i].job.reply(FrameRun(frames, placed[i]), status: status)
        }
        if batch.soldOut { context.catalog.announce() }
        if !batch.records.isEmpty {
            do {
                if try store.checkpointDue() { checkpointRequested?(self) }
            } catch {
                context.logger.error("cannot start a new customer log segment: \(error)")
            }
        }
        context.logger.debug("shard \(index): \(jobs.count) request(s), \(batch.records.count) record(s) in \((monotonicNanoseconds() - started) / 1000) µs")
        return outcomes
    }
}
