import GroserStorage
import GroserSystem
import GroserWire

/// How a batch is made durable, and undone when it cannot be: the undo log
/// of what the batch changed in memory, and the two strategies, the
/// customer log (one fdatasync a batch) and a store several groserd share
/// (one transaction a batch, run again after a conflict).
extension CustomerShard {
    /// What a batch changed in `state`, each change with what it replaced,
    /// to be undone (last first) when the batch cannot be made durable.
    /// Changing the state in place, rather than in an overlay of whole
    /// sessions copied out of it, spares a copy of a session and of its
    /// carts dictionary (copied on write) per request.
    struct Batch {
        var undo: [Undo] = []
        var records: [CustomerRecord] = []
        var soldOut = false
        /// What the request being run answers besides its outcome.
        var side: SideAnswer?

        /// Empty again, its arrays' room kept for the next batch.
        mutating func clear() {
            undo.removeAll(keepingCapacity: true)
            records.removeAll(keepingCapacity: true)
            soldOut = false
            side = nil
        }
    }

    /// A request's answer beyond its `CommerceOutcome`: an account step's
    /// answer, or where in the shard's `frames` a cart mutation wrote its
    /// whole response frame (its outcome then carries no body). Kept beside the
    /// outcomes, so a batch that fails drops them with them.
    enum SideAnswer {
        case step(AccountStepAnswer)
        case frame(Range<Int>)
    }

    /// What a change replaced.
    enum Undo {
        /// A whole session (nil: there was none).
        case session(SessionKey, SessionState?)
        /// One cart of a session, and the session's last activity.
        case cart(SessionKey, storeUID: String, StoredCart?, lastActiveUnix: Int64)
        /// An edit made in place in one cart (`created`: the edit made the
        /// cart, which goes), and the session's last activity.
        case edit(SessionKey, storeUID: String, CartUndo, created: Bool, lastActiveUnix: Int64)
        /// One remembered answer of a session.
        case answer(SessionKey, name: String, StoredAnswer?)
    }

    /// Sets a whole session (nil removes it), undoably.
    func put(_ session: SessionState?, for key: SessionKey, _ batch: inout Batch) {
        let old = if let session { state.sessions.updateValue(session, forKey: key) } else { state.sessions.removeValue(forKey: key) }
        batch.undo.append(.session(key, old))
    }

    /// Puts back what the batch changed.
    func undo(_ batch: Batch) {
        for change in batch.undo.reversed() {
            switch change {
            case .session(let key, let old):
                state.sessions[key] = old
            case .cart(let key, let storeUID, let old, let lastActive):
                state.sessions[key]?.carts[storeUID] = old
                state.sessions[key]?.lastActiveUnix = lastActive
            case .edit(let key, let storeUID, let undo, let created, let lastActive):
                withSession(key) { s in
                    if created { s.carts[storeUID] = nil } else { s.carts[storeUID]?.revert(undo) }
                    s.lastActiveUnix = lastActive
                }
            case .answer(let key, let name, let old):
                state.sessions[key]?.answers[name] = old
            }
        }
    }

    /// A batch against the customer log: the rules on the state in memory
    /// (checkouts in one transaction of the catalog's database), then the
    /// records appended with one fdatasync.
    func runLogged(_ jobs: UnsafeBufferPointer<ShardJob>, _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch,
                   _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        let needsDatabase = Self.needsDatabase(jobs)
        do {
            if needsDatabase {
                try context.orders.write { (tx) throws(StorageError) in
                    readThrough(tx)
                    defer { readThrough(nil) }
                    for i in jobs.indices {
                        outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, tx))
                        sides.append(batch.side.take())
                    }
                }
            } else {
                for i in jobs.indices {
                    outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, nil))
                    sides.append(batch.side.take())
                }
            }
            if !batch.records.isEmpty {
                let started = monotonicNanoseconds()
                try store.append(batch.records)
                context.durability.record(nanoseconds: monotonicNanoseconds() &- started)
            }
        } catch {
            failAll(jobs, error, &batch, &outcomes, &sides)
        }
    }

    /// Whether a batch reads products through the database's transaction
    /// (locked): only with a checkout or ListOrders, which write or read
    /// orders there; cart mutations otherwise see the shard's cache.
    private static func needsDatabase(_ jobs: UnsafeBufferPointer<ShardJob>) -> Bool {
        // By index: `contains(where:)` handed the closure a copy of each job.
        for i in jobs.indices {
            switch jobs[i].job.request.method { case .checkout, .listOrders: return true; default: continue }
        }
        return false
    }

    /// Times a batch is run again after another host changed one of its
    /// sessions first.
    static let sharedAttempts = 5

    /// A batch against a store several groserd share: one transaction that
    /// reads the batch's sessions afresh (locked), applies the rules, writes
    /// the records and commits; run again when another host won a race.
    func runShared(_ jobs: UnsafeBufferPointer<ShardJob>, _ shared: any SharedCustomerStore, _ catalog: EncodedCatalog,
                   _ now: Int64, _ batch: inout Batch,
                   _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        var keys: [SessionKey] = []
        var answers: [(SessionKey, String)] = []
        for i in jobs.indices {
            jobs[i].appendKeys(to: &keys)
            jobs[i].appendAnswerNames(to: &answers)
        }
        let needsDatabase = Self.needsDatabase(jobs)
        let answerCutoff = now - context.lifetimes.answers
        for attempt in 1...Self.sharedAttempts {
            do {
                let started = monotonicNanoseconds()
                let fresh = try shared.begin(reading: keys, answers: answers, answerCutoff: answerCutoff)
                for (key, session) in fresh { state.sessions[key] = session }
                // As runLogged: products are read through the transaction
                // (locked, FOR UPDATE) only in a batch with a checkout or
                // ListOrders; cart mutations otherwise see the shard's cache.
                // Locking every cart-add's product serialized all batches
                // naming one product, on every host, behind each commit.
                let tx: (any CommerceTransaction)? = needsDatabase ? shared.transaction : nil
                readThrough(tx)
                for i in jobs.indices {
                    outcomes.append(handle(jobs.baseAddress! + i, catalog, now, &batch, tx))
                    sides.append(batch.side.take())
                }
                try shared.commit(batch.records, state: state, answerCutoff: answerCutoff)
                context.durability.record(nanoseconds: monotonicNanoseconds() &- started)
                return
            } catch where error.isConflict && attempt < Self.sharedAttempts {
                context.health.conflict()
                context.logger.debug("shard \(index): another groserd changed a session of this batch first; running it again (\(attempt))")
                shared.rollback()
                undo(batch)
                batch = Batch()
                outcomes.removeAll(keepingCapacity: true)
                sides.removeAll(keepingCapacity: true)
            } catch {
                shared.rollback()
                failAll(jobs, error, &batch, &outcomes, &sides)
                return
            }
        }
    }

    /// Answers every request of a batch that could not be made durable
    /// UNAVAILABLE, and undoes what it changed in memory.
    private func failAll(_ jobs: UnsafeBufferPointer<ShardJob>, _ error: any Error, _ batch: inout Batch,
                         _ outcomes: inout [CommerceOutcome], _ sides: inout [SideAnswer?]) {
        context.logger.error("a batch of \(jobs.count) cart request(s) could not be made durable: \(error)")
        let failed = CommerceOutcome.failed(Status(.unavailable, "The change could not be saved (\(error)); nothing was changed. Try again later."))
        outcomes = jobs.map { _ in failed }
        sides = jobs.map { _ in nil }
        undo(batch)
        batch = Batch()
    }
}
