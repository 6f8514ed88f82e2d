import GroserStorage
import GroserWire

/// Cart mutations: the shared path of AddItem, SetQuantity, RemoveItem and
/// ClearCart, and how a changed cart is stored and logged.
extension CustomerShard {
    /// The shared path of every cart mutation: session and store checks,
    /// idempotency, the version check, the rule's edit made in place, the
    /// new version, the answer. `decide` reads the cart and returns its edit
    /// (nil: none, the version alone moves on).
    func mutate(_ field: MethodField, _ id: UInt64, _ m: CartMutation, fingerprint: @autoclosure () -> String, _ key: SessionKey?,
                _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch, product requested: String? = nil,
                decide: (borrowing StoredCart, CartRules.Lookup, CartRules.LineOf) throws(Refusal) -> CartEdit?) throws -> CommerceOutcome {
        // Keys only: a copy of the session or of its holder, alive while
        // the state changes below, made the carts dictionary copy on write.
        // The holder's place in the sessions is found once (each lookup
        // hashed the key again): nothing is added to or removed from the
        // sessions before the change is made.
        let (key, holderKey, holder) = try cartHolderIndex(key)
        try checkStore(m.storeUID, catalog)
        // Only a request with an idempotency key needs its fingerprint (the
        // string building showed in the profile of keyless adds).
        let print = m.idempotencyKey.isEmpty ? "" : "\(field.methodName)|\(m.storeUID)|\(m.expectedVersion)|\(fingerprint())"
        if let replay = try replay(key, m.idempotencyKey, print, now) { return replay }
        let rules = context.rules
        let look = lookup()
        // The rule reads a reference to the stored lines, dropped before
        // the edit is made in place (a copy kept alive made the edit copy them).
        // The cart's place in its holder's carts is found once (each
        // lookup hashed the store's uid again).
        var found = withSession(at: holder) { s in s.carts.index(forKey: m.storeUID) }
        var cart = found.map { c in withSession(at: holder) { s in s.carts[at: c] } } ?? StoredCart()
        try rules.checkVersion(cart, expected: m.expectedVersion)
        // The requested product's line is found once, for the rule, and
        // when it has a good slot that answers the rule's lookup (no hashing
        // of the uid).
        var line = CartRules.LineOf.search
        if let requested {
            let i = CartRules.line(of: requested, in: cart)
            line = .at(i)
            if let i, let slot = cart.lines[i].slot, trusted(slot) { remember(slot, for: requested) }
        }
        let edit = try decide(cart, look, line)
        cart = StoredCart()
        try checkLookups()
        let created = found == nil
        if created {
            found = withSession(at: holder) { s in
                s.carts[m.storeUID] = StoredCart()
                return s.carts.index(forKey: m.storeUID)
            }
        }
        let place = found!
        let (undo, lastActive) = withSession(at: holder) { s in
            defer { s.lastActiveUnix = now }
            return (s.carts.withCart(at: place) { Self.apply(edit, to: &$0) }, s.lastActiveUnix)
        }
        // The cart as shown, measured: current prices, read through each
        // line's product slot (looked up again only where it is missing or
        // stale), and no line of a product the catalog no longer has (those
        // go with this change). Written below, from the cart's lines.
        let answer: SlottedCartAnswer
        let stored: Int
        do {
            withSession(at: holder) { s in s.carts.withCart(at: place) { refreshSlots(&$0.lines) } }
            try checkLookups()
            (answer, stored) = try withSession(at: holder) { (s) throws(Refusal) in
                try s.carts.withCart(at: place) { (c) throws(Refusal) in
                    let memo = lineMemo.entry(holder: holder, place: place, lines: c.lines.count)
                    return (try SlottedCartAnswer(c, storeUID: m.storeUID, defaultCurrency: rules.defaultCurrency, memo: memo), c.lines.count)
                }
            }
        } catch {
            withSession(at: holder) { s in
                if created { s.carts[m.storeUID] = nil } else { s.carts.withCart(at: place) { $0.revert(undo) } }
                s.lastActiveUnix = lastActive
            }
            throw error
        }
        // One line's change, unless lines were dropped or the store keeps
        // whole carts (or the edit was none, or a clear).
        let change = answer.shown < stored || shared != nil ? nil : withSession(at: holder) { s in
            s.carts.withCart(at: place) { $0.lineChange(undoing: undo) }
        }
        if let change {
            batch.records.append(.cartLine(holderKey, storeUID: m.storeUID, change, atUnix: now))
            batch.undo.append(.edit(holderKey, storeUID: m.storeUID, undo, created: created, lastActiveUnix: lastActive))
        } else {
            // Logged as the whole cart: lines dropped, or a store that
            // keeps whole carts, or no one line changed.
            let (before, after) = withSession(at: holder) { s in
                var before = s.carts[at: place]
                before.revert(undo)
                return (before, s.carts.withCart(at: place) { c in
                    c.lines.removeAll { $0.slot == nil }
                    return c
                })
            }
            batch.records.append(.cart(holderKey, storeUID: m.storeUID, after, atUnix: now))
            batch.undo.append(.cart(holderKey, storeUID: m.storeUID, created ? nil : before, lastActiveUnix: lastActive))
        }
        if m.idempotencyKey.isEmpty && !bodiesWanted {
            // The whole response frame, into the shard's buffer of frames:
            // the body alone, then the frame around it, were two
            // allocations and a copy, and a frame of its own one more (see SideAnswer).
            batch.side = .frame(withSession(at: holder) { s in
                s.carts.withCart(at: place) { c in
                    frames.append(exactly: answer.frameSize(id: id, field: field)) { answer.writeFrame(c, id: id, field: field, into: $0) }
                }
            })
            return .ok(field, [])
        }
        let body = withSession(at: holder) { s in s.carts.withCart(at: place) { answer.body($0) } }
        remember(key: key, m.idempotencyKey, print, field, body, now, &batch)
        return .ok(field, body)
    }

    /// `edit` made in place (nil: the version alone moves on).
    private static func apply(_ edit: consuming CartEdit?, to cart: inout StoredCart) -> CartUndo {
        if case .some(let e) = consume edit { return cart.apply(e) }
        defer { cart.version += 1 }
        return CartUndo(version: cart.version, step: .lines(cart.lines))
    }

    /// Stores a session's cart for `storeUID`, in place, undoably, and logs
    /// it: the one line that changed when that is all (`CartLineChange`),
    /// else the whole cart.
    func save(_ cart: StoredCart, key: SessionKey, storeUID: String, _ now: Int64, _ batch: inout Batch) {
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
