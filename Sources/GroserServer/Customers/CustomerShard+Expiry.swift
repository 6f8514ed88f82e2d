import GroserStorage
import GroserSystem
import GroserWire

/// Expiry and checkpoints: idle sessions and old answers swept out, and
/// the sealed log folded into a snapshot.
extension CustomerShard {
    func sweepIfDue() {
        let now = context.unixTime()
        guard now - lastSweep >= context.lifetimes.sweepSeconds else { return }
        lastSweep = now
        sweep(now: now)
    }

    func sweep(now: Int64) {
        if let shared {
            // Memory is a cache of the shared store: what expired is
            // forgotten here, and the store's checkpoint removes it there.
            _ = state.expire(nowUnix: now, answerLifetime: context.lifetimes.answers, idleLifetime: context.lifetimes.idleSessions)
            shared.setExpiry(idleBefore: now - context.lifetimes.idleSessions, answersBefore: now - context.lifetimes.answers)
            return
        }
        let removed = state.expire(nowUnix: now, answerLifetime: context.lifetimes.answers,
                                   idleLifetime: context.lifetimes.idleSessions)
        guard !removed.isEmpty else { return }
        do {
            try store.append(removed.map { .sessionRemoved($0) })
            context.logger.info("shard \(index): removed \(removed.count) session(s) idle for more than \(context.lifetimes.idleSessions) s")
        } catch {
            // They are gone from memory; the next start expires them again.
            context.logger.warning("shard \(index): cannot log the removal of \(removed.count) idle session(s): \(error)")
        }
    }

    /// The compactor's call: folds the sealed log into a snapshot.
    func checkpoint() {
        let lifetimes = context.lifetimes
        let now = context.unixTime()
        do {
            // Answers expire by a rule every reader applies; idle sessions
            // only by the shard's logged removals (reads keep a session
            // alive, and leave no record).
            let kept = try store.checkpoint { state in
                _ = state.expire(nowUnix: now, answerLifetime: lifetimes.answers, idleLifetime: .max)
            }
            context.logger.info("shard \(index): checkpoint written with \(kept) session(s)")
        } catch {
            context.logger.error("shard \(index): checkpoint failed (the log is kept whole and will be tried again): \(error)")
        }
    }
}
