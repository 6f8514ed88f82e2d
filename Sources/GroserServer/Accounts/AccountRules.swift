import GroserStorage
import GroserWire

/// The account rules, as pure functions over values: what an email, a
/// password and a name must be, and how a guest's carts merge into an
/// account's. No storage and no clock inside; tested without a daemon.
public struct AccountRules: Sendable {
    public var limits: CartLimits
    public init(limits: CartLimits) { self.limits = limits }

    public static let maximumEmailLength = 254
    public static let minimumPasswordBytes = 8
    /// libsodium hashes any length; a bound keeps one request's work bounded.
    public static let maximumPasswordBytes = 1024
    public static let maximumNameLength = 100

    /// The form accounts are compared, throttled and stored in: trimmed,
    /// lower-cased, and in Unicode NFC, so the composed and decomposed
    /// forms of "josé@" are one account. (Strings compare by canonical
    /// equivalence, but an account's key is made from its bytes.)
    public static func normalizedEmail(_ email: String) -> String {
        // The standard library's NFC (groserd does without Foundation).
        String(decoding: legacyNormalizedEmail(email)._nfcCodeUnits, as: UTF8.self)
    }

    /// The form emails were stored in before they were normalised to NFC:
    /// an account registered then is kept under it (AccountService looks
    /// there when the NFC form has no account).
    public static func legacyNormalizedEmail(_ email: String) -> String {
        email.trimmingCharacters.lowercased()
    }

    /// Register's answer for an email that has an account (§7A.1 says why
    /// it is told); the shard's register step answers the same words.
    static let emailTaken = Refusal(.alreadyExists, "An account with this email already exists; log in instead.")

    /// The registration's email and name, checked; the password's length
    /// checked (the password itself goes only to the hash).
    public func check(_ r: Registration) throws(Refusal) -> (email: String, name: String) {
        let email = Self.normalizedEmail(r.email)
        try Self.checkEmail(email)
        let bytes = r.password.utf8.count
        guard bytes >= Self.minimumPasswordBytes else {
            throw Refusal(.invalidArgument, "The password must have at least \(Self.minimumPasswordBytes) bytes; it has \(bytes).")
        }
        guard bytes <= Self.maximumPasswordBytes else {
            throw Refusal(.invalidArgument, "The password must have at most \(Self.maximumPasswordBytes) bytes; it has \(bytes).")
        }
        guard !r.password.utf8.contains(0) else { throw Refusal(.invalidArgument, "The password must not contain NUL characters.") }
        let name = r.name.trimmingCharacters
        guard !name.isEmpty else { throw Refusal(.invalidArgument, "The account needs a name.") }
        guard name.count <= Self.maximumNameLength else {
            throw Refusal(.invalidArgument, "The name must have at most \(Self.maximumNameLength) characters; it has \(name.count).")
        }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw Refusal(.invalidArgument, "The name must not contain control characters.")
        }
        return (email, name)
    }

    /// The login's email, checked the same way whether or not an account
    /// has it (a refusal here tells nothing about accounts).
    public func check(_ d: LoginDetails) throws(Refusal) -> String {
        let email = Self.normalizedEmail(d.email)
        guard !email.isEmpty else { throw Refusal(.invalidArgument, "The login names no email.") }
        guard email.utf8.count <= Self.maximumEmailLength else {
            throw Refusal(.invalidArgument, "The email must have at most \(Self.maximumEmailLength) bytes.")
        }
        guard !d.password.isEmpty else { throw Refusal(.invalidArgument, "The login has no password.") }
        guard d.password.utf8.count <= Self.maximumPasswordBytes else {
            throw Refusal(.invalidArgument, "The password must have at most \(Self.maximumPasswordBytes) bytes.")
        }
        guard d.idempotencyKey.utf8.count <= 128 else {
            throw Refusal(.invalidArgument, "The idempotency key must have at most 128 bytes.")
        }
        return email
    }

    static func checkEmail(_ email: String) throws(Refusal) {
        guard !email.isEmpty else { throw Refusal(.invalidArgument, "The account needs an email.") }
        guard email.utf8.count <= maximumEmailLength else {
            throw Refusal(.invalidArgument, "The email must have at most \(maximumEmailLength) bytes.")
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix("."),
              !email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) else {
            throw Refusal(.invalidArgument, "\"\(clip(email))\" is not an email address (name@domain).")
        }
    }

    /// Merges a guest's carts (by store uid) into an account's: for each
    /// store where the guest has lines, lines of a product the account cart
    /// has are summed (capped at the line maximum, the units over it named
    /// in the answer), other lines are appended in the guest's order while
    /// the cart has room (those that find it full are named as not added).
    /// Nothing else is dropped and no product gets two lines. Each account
    /// cart touched moves to a new version, so a checkout that confirmed the
    /// cart before the merge is refused as stale rather than silently
    /// charging for the guest's lines. Returns the carts that changed and
    /// what was done, by store uid.
    public func merge(guest: [String: StoredCart], into account: [String: StoredCart])
        -> (carts: [String: StoredCart], merged: [MergedCart]) {
        var changed: [String: StoredCart] = [:]
        var merged: [MergedCart] = []
        for store in guest.keys.sorted() {
            guard let g = guest[store], !g.lines.isEmpty else { continue }
            var cart = account[store] ?? StoredCart()
            var lines: [MergedLine] = []
            for line in g.lines {
                if let i = cart.lines.firstIndex(where: { $0.productUID == line.productUID }) {
                    let sum = UInt64(cart.lines[i].quantity) + UInt64(line.quantity)
                    let kept = UInt32(min(sum, UInt64(limits.maximumQuantity)))
                    let dropped = UInt32(min(sum - UInt64(kept), UInt64(UInt32.max)))
                    cart.lines[i].quantity = max(cart.lines[i].quantity, kept)
                    lines.append(MergedLine(productUID: line.productUID, guestQuantity: line.quantity,
                                            quantity: cart.lines[i].quantity, summed: true, droppedUnits: dropped))
                } else if cart.lines.count < limits.maximumLines {
                    var added = line
                    added.quantity = min(line.quantity, limits.maximumQuantity)
                    // The guest's shard's product slot stays there (the account's shard looks its own up).
                    added.slot = nil
                    cart.lines.append(added)
                    lines.append(MergedLine(productUID: line.productUID, guestQuantity: line.quantity, quantity: added.quantity,
                                            droppedUnits: line.quantity - added.quantity))
                } else {
                    lines.append(MergedLine(productUID: line.productUID, guestQuantity: line.quantity, quantity: 0,
                                            droppedUnits: line.quantity, notAdded: true))
                }
            }
            cart.version += 1
            changed[store] = cart
            merged.append(MergedCart(storeUID: store, lines: lines, version: cart.version))
        }
        return (changed, merged)
    }
}
