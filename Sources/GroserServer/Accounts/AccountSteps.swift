import GroserStorage
import GroserWire

/// A step of Register or Login that a shard runs for the account service:
/// the service hashes and checks passwords on its own threads and asks the
/// shards only for what they own (an account, a guest's carts), so a slow
/// Argon2id never holds up a shard's cart writes. Each step is made
/// durable with the shard's batch before its answer comes back.
enum AccountStep: Sendable {
    /// Creates the account (ALREADY_EXISTS when its email has one).
    case register(owner: SessionKey, AccountRecord)
    /// The account's record, or nil when no account has the email.
    case credentials(owner: SessionKey)
    /// Seals a guest session for a merge into `owner` and answers its
    /// carts; nil for a session that is unknown, an account's, or sealed
    /// for another account (there is then nothing to merge).
    case seal(guest: SessionKey, owner: SessionKey)
    /// Merges the sealed guest's carts into the account (once per guest)
    /// and, when `newSession`, opens a session bound to the account.
    /// `fingerprint` names the request as sent (for its idempotency key).
    case merge(owner: SessionKey, guest: SessionKey?, carts: [String: StoredCart], idempotencyKey: String, fingerprint: String,
               newSession: Bool)
    /// Removes a guest session whose merge is done.
    case removeSealed(guest: SessionKey)
}

enum AccountStepAnswer: Sendable {
    case account(Account)
    case credentials(AccountRecord?)
    case guestCarts([String: StoredCart]?)
    case login(LoginResult)
    case done
}

enum AccountStepOutcome: Sendable {
    case answer(AccountStepAnswer)
    case failed(Status)
}

/// A step with where its outcome goes (called on the shard's thread once
/// the step is durable).
struct AccountStepCall: Sendable {
    var step: AccountStep
    var done: @Sendable (AccountStepOutcome) -> Void
}

extension Account {
    init(_ r: AccountRecord) { self.init(email: r.email, name: r.name, createdAtUnix: r.createdAtUnix) }
}
