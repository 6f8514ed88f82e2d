import GroserStorage
import GroserWire

/// The products a request's rules see: the shard's cache (or the checkout
/// batch's transaction), memoized for the request, with a failed read kept
/// aside to turn the answer into UNAVAILABLE.
extension CustomerShard {
    /// The products a rule sees: the cache, filled from the catalog's
    /// store; inside a checkout batch's transaction, misses are read through
    /// it (the connection is the transaction's). A failed read is kept in
    /// `lookupFailure` and turns the request's answer into UNAVAILABLE.
    /// Each call starts a request's lookups afresh; the closure is made
    /// once per shard, so a request allocates nothing for it (a closure
    /// and its memo per request were two allocations).
    func lookup(_ tx: (any CommerceTransaction)?) -> CartRules.Lookup {
        lookupTx = tx
        lastKnown = false
        lastProduct = nil
        return productLookup
    }

    func product(_ uid: String) -> ProductRecord? {
        if lastKnown, lastUID == uid { return lastProduct }
        do {
            let product: ProductRecord?
            if let tx = lookupTx {
                if let known = cache.known(uid) { product = known } else { product = try tx.product(uid) }
            } else {
                product = try cache.product(uid)
            }
            // Only a request's first product is remembered (the rule's,
            // asked again when the cart is shown): remembering each line's
            // too cost about 300 instructions a line.
            if !lastKnown {
                lastKnown = true
                lastUID = uid
                lastProduct = product
            }
            return product
        } catch {
            lookupFailure = error
        }
        return nil
    }

    /// Called before a request changes anything: a failed product read
    /// refuses it rather than passing for a missing product.
    func checkLookups() throws(StorageError) {
        if let failure = lookupFailure { throw failure }
    }
}
