import GroserSystem

/// Accounts: register, log in (the guest's carts merge into the account's),
/// log out, who am I.
extension GroserClient {
    /// Creates an account (it does not log in). ALREADY_EXISTS when the
    /// email has one.
    public func register(email: String, password: String, name: String, timeout: Double? = nil) throws(GroserError) -> Account {
        guard case .register(let account) = try call(.register(Registration(email: email, password: password, name: name)),
                                                     timeout: timeout) else { throw Self.mismatch("Register") }
        return account
    }

    /// Logs in: answers a new session bound to the account, and what was
    /// merged from `guestSession`'s carts (which ends with the login). A
    /// retry with the same `idempotencyKey` merges nothing again.
    public func login(email: String, password: String, guestSession: String = "", idempotencyKey: String = "",
                      timeout: Double? = nil) throws(GroserError) -> LoginResult {
        let details = LoginDetails(email: email, password: password, guestSession: guestSession, idempotencyKey: idempotencyKey)
        guard case .login(let result) = try call(.login(details), timeout: timeout) else { throw Self.mismatch("Login") }
        return result
    }

    /// Revokes a logged-in session at once.
    public func logout(session: String, timeout: Double? = nil) throws(GroserError) {
        guard case .logout = try call(.logout(session: session), timeout: timeout) else { throw Self.mismatch("Logout") }
    }

    /// The session's account (nil for an anonymous session).
    public func whoAmI(session: String, timeout: Double? = nil) throws(GroserError) -> Identity {
        guard case .whoAmI(let identity) = try call(.whoAmI(session: session), timeout: timeout) else { throw Self.mismatch("WhoAmI") }
        return identity
    }

    // MARK: Async

    /// Creates an account (it does not log in).
    public func register(email: String, password: String, name: String,
                         timeout: Duration? = nil) async throws(GroserError) -> Account {
        try await answer(.register(Registration(email: email, password: password, name: name)), timeout, "Register") {
            if case .register(let v) = $0 { v } else { nil }
        }
    }

    /// Logs in, merging `guestSession`'s carts into the account's.
    public func login(email: String, password: String, guestSession: String = "", idempotencyKey: String = "",
                      timeout: Duration? = nil) async throws(GroserError) -> LoginResult {
        let details = LoginDetails(email: email, password: password, guestSession: guestSession, idempotencyKey: idempotencyKey)
        return try await answer(.login(details), timeout, "Login") { if case .login(let v) = $0 { v } else { nil } }
    }

    /// Revokes a logged-in session at once.
    public func logout(session: String, timeout: Duration? = nil) async throws(GroserError) {
        try await answer(.logout(session: session), timeout, "Logout") { if case .logout = $0 { () } else { nil } }
    }

    /// The session's account (nil for an anonymous session).
    public func whoAmI(session: String, timeout: Duration? = nil) async throws(GroserError) -> Identity {
        try await answer(.whoAmI(session: session), timeout, "WhoAmI") { if case .whoAmI(let v) = $0 { v } else { nil } }
    }
}
