import GroserStorage
import GroserWire

/// The account steps a shard runs (AccountStep): each reads and changes
/// only this shard's entries, undoably like any request of a batch.
extension CustomerShard {
    func runStep(_ step: AccountStep, _ now: Int64, _ batch: inout Batch) throws(Refusal) -> AccountStepAnswer {
        switch step {
        case .register(let owner, let record):
            if current(owner)?.account != nil {
                throw Refusal(.alreadyExists, "An account with this email already exists; log in instead.")
            }
            try checkRoomForSession()
            var entry = SessionState(createdAtUnix: now)
            entry.account = record
            put(entry, for: owner, &batch)
            batch.records.append(.account(owner, record))
            return .account(Account(record))

        case .credentials(let owner):
            return .credentials(current(owner)?.account)

        case .seal(let guest, let owner):
            guard var g = current(guest), g.account == nil, g.owner == nil, !g.ended else { return .guestCarts(nil) }
            if let sealed = g.sealedInto { return .guestCarts(sealed == owner ? g.carts.dictionary : nil) }
            g.sealedInto = owner
            put(g, for: guest, &batch)
            batch.records.append(.sealed(guest, owner: owner))
            return .guestCarts(g.carts.dictionary)

        case .merge(let owner, let guest, let carts, let idempotencyKey, let print, let newSession):
            guard var entry = current(owner), let record = entry.account else {
                throw Refusal(.unauthenticated, "The email or password is wrong.")
            }
            // Before anything changes: the login's session is stored at once.
            if newSession { try checkRoomForSession() }
            let answerName = idempotencyKey.isEmpty ? "" : "login:" + idempotencyKey
            var result: LoginResult
            if !answerName.isEmpty, let stored = entry.answers[answerName], now - stored.atUnix <= context.lifetimes.answers {
                guard stored.answer.fingerprint == print, let r = BodyEncoder.decodeLogin(stored.answer.body) else {
                    throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(idempotencyKey))\" was already used for a different request.")
                }
                result = r
            } else if let guest, let stored = entry.absorbed[guest], let r = BodyEncoder.decodeLogin(stored.answer.body) {
                // This guest was merged already (a retry without a key, or
                // a merge finished at start-up): nothing is merged twice.
                result = r
            } else {
                let rules = AccountRules(limits: context.rules.limits)
                let (changed, merged) = rules.merge(guest: carts, into: entry.carts.dictionary)
                for store in changed.keys.sorted() {
                    let cart = changed[store]!
                    entry.carts[store] = cart
                    batch.records.append(.cart(owner, storeUID: store, cart, atUnix: now))
                }
                result = LoginResult(session: "", account: Account(record), merged: merged,
                                     quantityMaximum: rules.limits.maximumQuantity, cartLineMaximum: UInt32(rules.limits.maximumLines))
                let remembered = StoredAnswer(IdempotentAnswer(fingerprint: print, field: MethodField.login.rawValue,
                                                               body: BodyEncoder.login(result)), atUnix: now)
                if let guest {
                    entry.absorbed[guest] = remembered
                    batch.records.append(.absorbed(owner: owner, guest: guest, remembered))
                }
                if !answerName.isEmpty {
                    entry.answers[answerName] = remembered
                    batch.records.append(.answer(owner, key: answerName, remembered))
                }
            }
            entry.lastActiveUnix = now
            put(entry, for: owner, &batch)
            if newSession {
                let (token, key) = try newToken()
                var s = SessionState(createdAtUnix: now)
                s.owner = owner
                put(s, for: key, &batch)
                batch.records.append(.boundSession(key, owner: owner, createdAtUnix: now))
                result.session = token
            }
            return .login(result)

        case .removeSealed(let guest):
            guard let g = current(guest), g.sealedInto != nil else { return .done }
            endGuest(guest, g, now, &batch)
            return .done
        }
    }

    /// Runs one step on the calling thread, as a batch of one (durable
    /// before it returns). Only while the shard's thread is not started.
    func runNow(_ step: AccountStep, for request: Request) -> AccountStepOutcome {
        let box = StepBox()
        let job = CommerceJob(request: request, caller: Caller(uid: nil), receivedAt: 0) { _ in }
        process([ShardJob(job: job, key: nil, step: AccountStepCall(step: step) { box.outcome = $0 })])
        return box.outcome ?? .failed(Status(.internal, "The step gave no answer."))
    }
}

private final class StepBox: @unchecked Sendable {
    var outcome: AccountStepOutcome?
}
