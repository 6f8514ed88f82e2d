import GroserStorage
import GroserSystem
import GroserWire

/// Sessions: new tokens for this shard, the checks of the session a
/// request names, the entry that holds its carts, and in-place access.
extension CustomerShard {
    /// A new session token whose key belongs to this shard (1 in `count` does).
    func newToken() throws(Refusal) -> (token: String, key: SessionKey) {
        for _ in 0..<256 {
            let token: String
            do { token = try KernelRandom.hex(16) } catch {
                throw Refusal(.unavailable, "The kernel gave no random bytes for a session token: \(error).")
            }
            let k = SessionKey(token: token)
            if k.shard(of: count) == index { return (token, k) }
        }
        throw Refusal(.unavailable, "No session token could be made; try again.")
    }

    /// The request's session, checked: its key and, for a logged-in
    /// session, the account entry that owns it. Read in place: a copy of the
    /// session retains (and then releases) its dictionaries.
    func checkSessionKey(_ key: SessionKey?) throws(Refusal) -> (key: SessionKey, owner: SessionKey?) {
        let (key, owner, _) = try checkSession(key)
        return (key, owner)
    }

    /// `checkSessionKey`, with where the session lies in `state.sessions`.
    private func checkSession(_ key: SessionKey?) throws(Refusal) -> (key: SessionKey, owner: SessionKey?, index: SessionIndex) {
        guard let key else { throw Refusal(.unauthenticated, "The request carries no session; open one with OpenSession.") }
        // An account's own entry is no session (no token hashes to its key).
        guard let i = state.sessions.position(of: key) else { throw Self.unknownSession }
        let (isAccount, sealed, owner, ended) = withSession(at: i) { ($0.account != nil, $0.sealedInto != nil, $0.owner, $0.ended) }
        guard !isAccount else { throw Self.unknownSession }
        if ended { throw Self.endedSession }
        if sealed {
            throw Refusal(.failedPrecondition, "This session is being merged into an account by a login; use the session the login answers.")
        }
        return (key, owner, i)
    }

    typealias SessionIndex = Int

    /// The request's session, and the entry that holds its carts and
    /// orders: the session itself, or for a logged-in session its account.
    func cartHolderKeys(_ key: SessionKey?) throws(Refusal) -> (session: SessionKey, holder: SessionKey) {
        let (key, holder, _) = try cartHolderIndex(key)
        return (key, holder)
    }

    /// `cartHolderKeys`, with where the holder lies in `state.sessions`:
    /// valid until an entry is added to or removed from it.
    func cartHolderIndex(_ key: SessionKey?) throws(Refusal) -> (session: SessionKey, holder: SessionKey, index: SessionIndex) {
        let (key, owner, i) = try checkSession(key)
        guard let owner else { return (key, key, i) }
        guard let o = state.sessions.position(of: owner), withSession(at: o, { $0.account != nil }) else {
            throw Refusal(.unauthenticated, "The session's account is gone; log in again.")
        }
        return (key, owner, o)
    }

    /// `cartHolderKeys` with copies of both entries.
    func cartHolder(_ key: SessionKey?) throws(Refusal)
        -> (session: SessionKey, sessionState: SessionState, holder: SessionKey, holderState: SessionState) {
        let (key, holderKey) = try cartHolderKeys(key)
        guard let s = current(key), let holder = current(holderKey) else {
            throw Refusal(.unauthenticated, "The session is unknown; open one with OpenSession.")
        }
        return (key, s, holderKey, holder)
    }

    /// A session as the batch so far leaves it.
    func current(_ key: SessionKey) -> SessionState? { state.sessions[key] }

    /// `body` on the session of `key` in place, or nil when there is none:
    /// the dictionary's getter (and `values[i]`'s) copies the whole session,
    /// retaining and releasing its dictionaries.
    @inline(__always)
    func withSession<R>(_ key: SessionKey, _ body: (inout SessionState) -> R) -> R? {
        guard let i = state.sessions.position(of: key) else { return nil }
        return body(&state.sessions[at: i])
    }

    /// `body` on the session at `i` in place (an index from `checkSession`
    /// or `cartHolderIndex`, taken since nothing was added or removed).
    @inline(__always)
    func withSession<R, E: Error>(at i: SessionIndex, _ body: (inout SessionState) throws(E) -> R) throws(E) -> R {
        try body(&state.sessions[at: i])
    }
}
