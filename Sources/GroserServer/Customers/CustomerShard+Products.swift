import GroserStorage
import GroserWire

/// The products a request's rules see: the shard's cache (or the checkout
/// batch's transaction), memoized for the request, with a failed read kept
/// aside to turn the answer into UNAVAILABLE.
extension CustomerShard {
    /// The products a rule sees: the cache, filled from the catalog's
    /// store; inside a checkout batch's transaction (`readThrough`), misses
    /// are read through it (the connection is the transaction's). A failed read is kept in
    /// `lookupFailure` and turns the request's answer into UNAVAILABLE.
    /// Each call starts a request's lookups afresh; the closure is made
    /// once per shard, so a request allocates nothing for it (a closure
    /// and its memo per request were two allocations).
    func lookup() -> CartRules.Lookup {
        lastKnown = false
        lastSlot = nil
        return productLookup
    }

    func product(_ uid: String) -> ProductRecord? { slot(uid)?.product }

    /// Sets the transaction a batch's lookups read misses through (nil:
    /// the cache's store), once a batch: set per request, the copies of
    /// the existential showed in every cart request's profile.
    func readThrough(_ tx: (any CommerceTransaction)?) {
        lookupTx = tx
        readsThroughTransaction = tx != nil
    }

    /// The product's slot, as a line keeps it: the cache's, filled from the
    /// catalog's store. Inside a checkout batch's transaction a miss is
    /// read through the transaction into a slot of its own, invalid from
    /// the start: good for this request only (the cache is not filled from
    /// the transaction).
    func slot(_ uid: String) -> ProductSlot? {
        if lastKnown, lastUID == uid { return lastSlot }
        do {
            let slot: ProductSlot?
            if !readsThroughTransaction {
                slot = try cache.slot(uid)
            } else if let known = cache.known(uid) {
                slot = known
            } else {
                slot = try lookupTx!.product(uid).map { cache.oneOff($0) }
            }
            // Only a request's first product is remembered (the rule's,
            // asked again for its line): remembering each line's too cost
            // about 300 instructions a line.
            if !lastKnown { remember(slot, for: uid) }
            return slot
        } catch {
            lookupFailure = error
        }
        return nil
    }

    /// Makes `slot` the answer for `uid` for the rest of the request (a
    /// cart line's slot, still valid: the rule's lookup needs no hashing).
    func remember(_ slot: ProductSlot?, for uid: String) {
        lastKnown = true
        lastUID = uid
        lastSlot = slot
    }

    /// Brings each line's slot up to date, in place: a line whose slot is
    /// missing, invalid or another shard's looks its product up (nil: the
    /// catalog has none).
    func refreshSlots(_ lines: inout [CartLineRecord]) {
        // Read in place and borrowed: `lines[i].slot` retained and released
        // each line's slot to ask about it.
        let owner = cache.owner
        let stale = lines.withUnsafeBufferPointer { b in b.indices.contains { !Self.trusted(b[$0].slot, owner) } }
        guard stale else { return }
        for i in lines.indices where !trusted(lines[i].slot) {
            lines[i].slot = slot(lines[i].productUID)
        }
    }

    /// Whether a line's slot answers for its product: this shard's, still valid.
    func trusted(_ slot: borrowing ProductSlot?) -> Bool { Self.trusted(slot, cache.owner) }

    @inline(__always)
    static func trusted(_ slot: borrowing ProductSlot?, _ owner: ObjectIdentifier) -> Bool {
        switch slot {
        case .some(let s): s.owner == owner && s.isValid
        case .none: false
        }
    }

    /// Called before a request changes anything: a failed product read
    /// refuses it rather than passing for a missing product.
    func checkLookups() throws(StorageError) {
        if let failure = lookupFailure { throw failure }
    }
}
