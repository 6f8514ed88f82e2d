import GroserStorage
import GroserWire

/// Cart mutations: the shared path of AddItem, SetQuantity, RemoveItem and
/// ClearCart, and how a changed cart is stored and logged.
extension CustomerShard {
    /// The shared path of every cart mutation: session and store checks,
    /// idempotency, the version check, the change, the new version, the answer.
    func mutate(_ field: MethodField, _ id: UInt64, _ m: CartMutation, fingerprint: @autoclosure () -> String, _ key: SessionKey?,
                _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch, _ tx: (any CommerceTransaction)?,
                change: (StoredCart, CartRules.Lookup) throws(Refusal) -> StoredCart) throws -> CommerceOutcome {
        // Keys only: a copy of the session or of its holder, alive while
        // the state changes below, made the carts dictionary copy on write.
        // The holder's place in the sessions and its cart's place in its
        // carts are found once, and the change is saved there (each lookup
        // hashed the key or the store's uid again): nothing is added to or
        // removed from either before `save`.
        let (key, holderKey, holder) = try cartHolderIndex(key)
        try checkStore(m.storeUID, catalog)
        // Only a request with an idempotency key needs its fingerprint (the
        // string building showed in the profile of keyless adds).
        let print = m.idempotencyKey.isEmpty ? "" : "\(field.methodName)|\(m.storeUID)|\(m.expectedVersion)|\(fingerprint())"
        if let replay = try replay(key, m.idempotencyKey, print, now) { return replay }
        let (place, found) = withSession(at: holder) { s in
            let c = s.carts.index(forKey: m.storeUID)
            return (c, c.map { s.carts.values[$0] })
        }
        let cart = found ?? StoredCart()
        try context.rules.checkVersion(cart, expected: m.expectedVersion)
        let look = lookup(tx)
        var next = try change(cart, look)
        next.version = cart.version + 1
        // Encoded from the stored lines and their products: no `Cart` built.
        // Lines of products the catalog no longer has are not shown, and go
        // with this change: found by `shown`'s one lookup a line (a lookup
        // of its own for each line first made two, a third of a cart-add's
        // instructions with 20 lines under callgrind).
        let shown = try context.rules.shown(next, storeUID: m.storeUID, look)
        try checkLookups()
        CartRules.keepShown(&next.lines, shown.lines)
        save(next, key: holderKey, storeUID: m.storeUID, now, &batch, at: (holder, place))
        if m.idempotencyKey.isEmpty && !bodiesWanted {
            // The whole response frame at once, the body written in place:
            // the body alone, then the frame around it, were two
            // allocations and a copy (see SideAnswer).
            batch.side = .frame(shown.frame(id: id, field: field))
            return .ok(field, [])
        }
        let body = shown.body
        remember(key: key, m.idempotencyKey, print, field, body, now, &batch)
        return .ok(field, body)
    }

    /// Stores a session's cart for `storeUID`, in place, undoably, and logs
    /// it: the one line that changed when that is all (`CartLineChange`),
    /// else the whole cart.
    func save(_ cart: StoredCart, key: SessionKey, storeUID: String, _ now: Int64, _ batch: inout Batch,
              at place: (session: SessionIndex, cart: Dictionary<String, StoredCart>.Index?)? = nil) {
        if let place {
            let (old, lastActive) = withSession(at: place.session) { s in
                defer { s.lastActiveUnix = now }
                guard let c = place.cart else { return (s.carts.updateValue(cart, forKey: storeUID), s.lastActiveUnix) }
                var replaced = cart
                swap(&replaced, &s.carts.values[c])
                return (Optional(replaced), s.lastActiveUnix)
            }
            batch.records.append(record(key, storeUID, old, cart, now))
            return batch.undo.append(.cart(key, storeUID: storeUID, old, lastActiveUnix: lastActive))
        }
        let replaced = withSession(key) { s in
            defer { s.lastActiveUnix = now }
            return (s.carts.updateValue(cart, forKey: storeUID), s.lastActiveUnix)
        }
        guard let (old, lastActive) = replaced else {
            // (Callers checked the session; a cart record makes one, as the log's reader does.)
            batch.records.append(record(key, storeUID, nil, cart, now))
            var s = SessionState(createdAtUnix: now)
            s.carts[storeUID] = cart
            return put(s, for: key, &batch)
        }
        batch.records.append(record(key, storeUID, old, cart, now))
        batch.undo.append(.cart(key, storeUID: storeUID, old, lastActiveUnix: lastActive))
    }

    /// The log record of a cart going from `old` to `new`. (A shared
    /// store writes whole sessions and reads records only for their keys:
    /// no line is worked out for it.)
    private func record(_ key: SessionKey, _ storeUID: String, _ old: StoredCart?, _ new: StoredCart,
                        _ now: Int64) -> CustomerRecord {
        if shared == nil, let change = CartLineChange.between(old, new) {
            return .cartLine(key, storeUID: storeUID, change, atUnix: now)
        }
        return .cart(key, storeUID: storeUID, new, atUnix: now)
    }
}
