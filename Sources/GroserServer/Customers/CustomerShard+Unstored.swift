import GroserStorage
import GroserWire

/// Sessions whose token came from OpenSession and that nothing stored yet
/// (SessionTokens): reads see an empty session, the first change stores it
/// (within the shard's share of `--max-sessions`), and a change that is
/// refused stores nothing. An OpenSession flood thus costs no memory and
/// no log.
extension CustomerShard {
    static let unknownSession = Refusal(.unauthenticated, "The session is unknown; open one with OpenSession.")
    static let endedSession = Refusal(.unauthenticated, "The session ended when a login merged it into an account; use the session the login answered.")

    /// The refusal of a change that would store a session past the cap.
    var storeFull: Refusal {
        Refusal(.resourceExhausted, "groserd holds as many sessions as it may (--max-sessions \(context.maximumStoredPerShard * count)); a new session cannot be stored until others expire. Try again later.")
    }

    /// Throws `storeFull` when this shard holds its share of sessions. An
    /// anonymous session (the first change of a token from OpenSession) may
    /// take only nine tenths of it: the last tenth is kept for logins and
    /// registrations, so that anonymous carts can never lock accounts out.
    func checkRoomForSession(anonymous: Bool = false) throws(Refusal) {
        let limit = context.maximumStoredPerShard
        if sessionCount >= (anonymous ? limit - limit / 10 : limit) { throw storeFull }
    }

    /// Answers a request whose session key is not stored: when its token is
    /// a good unstored token, a read as for an empty session, and a change
    /// by storing the session and running the request again (undone if it
    /// is refused); otherwise UNAUTHENTICATED.
    func unstored(_ j: UnsafePointer<ShardJob>, _ key: SessionKey, _ catalog: EncodedCatalog, _ now: Int64,
                  _ batch: inout Batch, _ tx: (any CommerceTransaction)?) -> CommerceOutcome {
        let method = j.pointee.job.request.method
        guard let token = method.sessionToken, let created = context.tokens.createdAt(of: token, nowUnix: now) else {
            return .failed(Self.unknownSession.status)
        }
        switch method {
        case .getCart(_, let storeUID, _):
            do { try checkStore(storeUID, catalog) } catch { return .failed(error.status) }
            return .ok(.getCart, BodyEncoder.cart(context.rules.emptyCart(storeUID)))
        case .whoAmI:
            return .ok(.whoAmI, BodyEncoder.whoAmI(Identity(account: nil, sessionCreatedAtUnix: created)))
        case .listOrders:
            // Orders belong to stored sessions: checkout stores its session first.
            return .ok(.listOrders, BodyEncoder.listOrders([]))
        case .logout:
            return .failed(Status(.failedPrecondition, "The session is anonymous: there is no login to end (its carts stay)."))
        default:
            do { try checkRoomForSession(anonymous: true) } catch { return .failed(error.status) }
            let uid = j.pointee.job.caller.uid
            if let share = context.storedShare, !share.admit(uid) { return .failed(share.refusal.status) }
            let undoMark = batch.undo.count, recordMark = batch.records.count
            put(SessionState(createdAtUnix: created, lastActiveUnix: now), for: key, &batch)
            batch.records.append(.session(key, createdAtUnix: created))
            let outcome = handle(j, catalog, now, &batch, tx)
            if case .failed = outcome {
                context.storedShare?.refund(uid)
                var made = Batch()
                made.undo = Array(batch.undo[undoMark...])
                undo(made)
                batch.undo.removeSubrange(undoMark...)
                batch.records.removeSubrange(recordMark...)
            }
            return outcome
        }
    }

    /// Removes a guest session a login merged, leaving an `ended` mark
    /// while its token could still open it again unstored.
    func endGuest(_ guest: SessionKey, _ g: SessionState, _ now: Int64, _ batch: inout Batch) {
        guard context.tokens.mayStillBeGood(createdAtUnix: g.createdAtUnix, nowUnix: now) else {
            put(nil, for: guest, &batch)
            batch.records.append(.sessionRemoved(guest))
            return
        }
        var mark = SessionState(createdAtUnix: g.createdAtUnix)
        mark.ended = true
        put(mark, for: guest, &batch)
        batch.records.append(.ended(guest, createdAtUnix: g.createdAtUnix))
    }
}
