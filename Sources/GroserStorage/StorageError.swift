/// A storage failure: its kind, which tells a caller how to answer, and a
/// readable sentence with SQLite's or PostgreSQL's own message.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as far as the caller's answer is concerned.
    public enum Kind: Sendable, Hashable {
        /// The store refused or failed the work itself (a constraint, a
        /// full disk, a damaged file): the request fails.
        case failed
        /// The store could not be reached (PostgreSQL down or the
        /// connection lost): a caller may answer UNAVAILABLE and let the
        /// client retry.
        case unavailable
        /// Another host wrote the same rows first (a shared store): the
        /// batch is run again on what the store holds now, not answered
        /// UNAVAILABLE.
        case conflict
    }

    public var kind: Kind
    public var description: String

    /// A failure of kind `kind` (most often `.failed`), told by `description`.
    public init(_ description: String, kind: Kind = .failed) {
        self.description = description
        self.kind = kind
    }

    /// The store could not be reached (`Kind.unavailable`).
    public var isUnavailable: Bool { kind == .unavailable }
    /// Another host wrote the same rows first (`Kind.conflict`).
    public var isConflict: Bool { kind == .conflict }
}
