import GroserStorage
import GroserWire

/// A request on its way to a shard, with its session's key.
struct ShardJob: Sendable {
    var job: CommerceJob
    var key: SessionKey?
    /// A step of Register or Login (the job's request is the Login or
    /// Register it serves; its answer goes to `step.done`, not the reply).
    var step: AccountStepCall? = nil
}

extension ShardJob {
    /// The sessions the request reads or changes (a shared store reads them
    /// afresh for each batch; the owners of logged-in sessions come along).
    func appendKeys(to keys: inout [SessionKey]) {
        if let key { keys.append(key) }
        guard let step else { return }
        switch step.step {
        case .register(let owner, _), .credentials(let owner): keys.append(owner)
        case .seal(let guest, let owner): keys.append(guest); keys.append(owner)
        case .merge(let owner, let guest, _, _, _, _): keys.append(owner); if let guest { keys.append(guest) }
        case .removeSealed(let guest): keys.append(guest)
        }
    }

    /// The remembered answers the request may replay: its session's answer
    /// under its idempotency key (a login's, under the account's entry).
    func appendAnswerNames(to names: inout [(SessionKey, String)]) {
        if let step {
            if case .merge(let owner, _, _, let idempotencyKey, _, _) = step.step, !idempotencyKey.isEmpty {
                names.append((owner, "login:" + idempotencyKey))
            }
            return
        }
        guard let key else { return }
        let name: String
        switch job.request.method {
        case .addItem(let m, _, _), .setQuantity(let m, _, _), .removeItem(let m, _), .clearCart(let m): name = m.idempotencyKey
        case .checkout(let d): name = d.idempotencyKey
        default: return
        }
        if !name.isEmpty { names.append((key, name)) }
    }
}
