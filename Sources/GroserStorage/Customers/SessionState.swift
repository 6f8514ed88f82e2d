/// One session's carts and remembered answers, kept small: a million idle
/// sessions with a cart each must fit in a few hundred megabytes, so what
/// most sessions never have (remembered answers, an account, a login's
/// marks) lives in one shared box that only the sessions having any of it
/// allocate.
///
/// An account is kept as a session of its own (its key derived from the
/// email, never a token's), so its carts are carts like a guest's; the
/// sessions logged in to it point at it with `owner` and keep only their
/// remembered answers.
public struct SessionState: Sendable, Hashable {
    public var createdAtUnix: Int64
    /// The last request that used the session (idle sessions are removed).
    public var lastActiveUnix: Int64
    /// By store uid.
    public var carts = StoreCarts()
    /// The rarer facts; nil while every one of them is empty. Copied on
    /// write: a copy of the session shares it until one of them changes.
    @usableFromInline var rare: Rare?

    public init(createdAtUnix: Int64, lastActiveUnix: Int64? = nil) {
        self.createdAtUnix = createdAtUnix
        self.lastActiveUnix = lastActiveUnix ?? createdAtUnix
    }

    /// By idempotency key.
    @inlinable public var answers: [String: StoredAnswer] {
        get { rare?.answers ?? [:] }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().answers
        }
    }
    /// Set when this entry is an account (it never expires).
    @inlinable public var account: AccountRecord? {
        get { rare?.account }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().account
        }
    }
    /// A logged-in session: the account entry that holds its carts and orders.
    @inlinable public var owner: SessionKey? {
        get { rare?.owner }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().owner
        }
    }
    /// A guest session a login is merging into this account entry: it takes
    /// no more changes, and is removed once the account has its lines.
    @inlinable public var sealedInto: SessionKey? {
        get { rare?.sealedInto }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().sealedInto
        }
    }
    /// An account's merges, by guest session: the login's answer (without a
    /// token), so that a retried merge merges nothing and answers the same.
    @inlinable public var absorbed: [SessionKey: StoredAnswer] {
        get { rare?.absorbed ?? [:] }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().absorbed
        }
    }
    /// A mark left where a guest session was merged into an account by a
    /// login: its token may still be good unstored (see groserd's
    /// SessionTokens), and must not open an empty session again. It holds
    /// nothing else and expires as an idle session does.
    @inlinable public var ended: Bool {
        get { rare?.ended ?? false }
        _modify {
            defer { dropRareIfEmpty() }
            yield &uniqueRare().ended
        }
    }

    /// Keeps the promise that `rare` is nil while every rare fact is empty
    /// (a session whose answers expired frees its box).
    @usableFromInline
    mutating func dropRareIfEmpty() {
        if let r = rare, r.answers.isEmpty, r.account == nil, r.owner == nil, r.sealedInto == nil, r.absorbed.isEmpty, !r.ended {
            rare = nil
        }
    }

    @usableFromInline
    mutating func uniqueRare() -> Rare {
        if rare != nil && isKnownUniquelyReferenced(&rare) { return rare! }
        let r = rare.map { $0.copy() } ?? Rare()
        rare = r
        return r
    }

    public static func == (a: SessionState, b: SessionState) -> Bool {
        a.createdAtUnix == b.createdAtUnix && a.lastActiveUnix == b.lastActiveUnix && a.carts == b.carts
            && a.answers == b.answers && a.account == b.account && a.owner == b.owner && a.sealedInto == b.sealedInto
            && a.absorbed == b.absorbed && a.ended == b.ended
    }

    public func hash(into h: inout Hasher) {
        h.combine(createdAtUnix)
        h.combine(lastActiveUnix)
        h.combine(carts)
        h.combine(answers)
        h.combine(account)
        h.combine(owner)
        h.combine(sealedInto)
        h.combine(absorbed)
        h.combine(ended)
    }

    /// The rarer facts of a session. A class so that the session holds one
    /// word for all of them; changed only through `uniqueRare` (copy on
    /// write), so sharing one between copies of a session is safe.
    @usableFromInline
    final class Rare: @unchecked Sendable {
        @usableFromInline var answers: [String: StoredAnswer] = [:]
        @usableFromInline var account: AccountRecord?
        @usableFromInline var owner: SessionKey?
        @usableFromInline var sealedInto: SessionKey?
        @usableFromInline var absorbed: [SessionKey: StoredAnswer] = [:]
        @usableFromInline var ended = false
        @usableFromInline init() {}

        func copy() -> Rare {
            let r = Rare()
            r.answers = answers
            r.account = account
            r.owner = owner
            r.sealedInto = sealedInto
            r.absorbed = absorbed
            r.ended = ended
            return r
        }
    }
}
