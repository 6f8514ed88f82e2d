import GroserStorage
import GroserWire

/// Idempotency keys: a change's answer remembered under its key, and
/// replayed to a retry that carries the same key.
extension CustomerShard {
    /// Remembers the answer of a request with an idempotency key `name`.
    func remember(key: SessionKey, _ name: String, _ print: String, _ field: MethodField,
                  _ body: [UInt8], _ now: Int64, _ batch: inout Batch) {
        guard !name.isEmpty else { return }
        let answer = StoredAnswer(IdempotentAnswer(fingerprint: print, field: field.rawValue, body: body), atUnix: now)
        batch.records.append(.answer(key, key: name, answer))
        guard let old = withSession(key, { $0.answers.updateValue(answer, forKey: name) }) else {
            var s = SessionState(createdAtUnix: now)
            s.answers[name] = answer
            return put(s, for: key, &batch)
        }
        batch.undo.append(.answer(key, name: name, old))
    }

    /// The remembered answer of the session's earlier request with this
    /// idempotency key, or nil.
    func replay(_ key: SessionKey, _ name: String, _ print: String, _ now: Int64) throws(Refusal) -> CommerceOutcome? {
        guard !name.isEmpty, let stored = withSession(key, { $0.answers[name] }) ?? nil,
              now - stored.atUnix <= context.lifetimes.answers else { return nil }
        guard stored.answer.fingerprint == print, let field = MethodField(rawValue: stored.answer.field) else {
            throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(name))\" was already used for a different request.")
        }
        return .ok(field, stored.answer.body)
    }
}
