import GroserStorage
import GroserWire

/// Checkout: the cart turned into an order, stock taken and the order
/// written in the catalog's database, the cart emptied in the shard.
extension CustomerShard {
    func checkout(_ d: CheckoutDetails, _ key: SessionKey?, _ catalog: EncodedCatalog, _ now: Int64,
                  _ batch: inout Batch, _ tx: any CommerceTransaction) throws -> CommerceOutcome {
        let (key, holderKey) = try cartHolderKeys(key)
        try checkStore(d.storeUID, catalog)
        // A retry finds its order before anything else is checked (the
        // card may have expired since).
        let print = CartRules.checkoutFingerprint(d)
        if let replay = try replay(key, d.idempotencyKey, print, now) { return replay }
        let cart = withSession(holderKey, { $0.carts[d.storeUID] }) ?? nil
        // The order may be in the database while the log lost the cart's
        // clearing (a crash between the two): the retry finds it there.
        if !d.idempotencyKey.isEmpty, let stored = try tx.idempotentAnswer(session: key, key: d.idempotencyKey) {
            guard stored.fingerprint == print, let field = MethodField(rawValue: stored.field) else {
                throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(d.idempotencyKey))\" was already used for a different request.")
            }
            if let cart, cart.version == d.expectedVersion, !cart.lines.isEmpty {
                save(StoredCart(version: cart.version + 1, lines: []), key: holderKey, storeUID: d.storeUID, now, &batch)
            }
            remember(key: key, d.idempotencyKey, print, field, stored.body, now, &batch)
            return .ok(field, stored.body)
        }
        try tx.savepoint()
        do {
            var fresh: [String: ProductRecord?] = [:]
            var failure: StorageError?
            let lookup: CartRules.Lookup = { uid in
                if let p = fresh[uid] { return p }
                do {
                    let p = try tx.product(uid)
                    fresh[uid] = p
                    return p
                } catch let error as StorageError {
                    failure = error
                    return nil
                } catch {
                    failure = StorageError("\(error)")
                    return nil
                }
            }
            let city = try tx.storeCityCode(d.storeUID) ?? ""
            let plan: CartRules.CheckoutPlan
            do {
                plan = try context.rules.planCheckout(d, cart: cart, cityCode: city, lookup: lookup,
                                                      now: context.yearMonth(), unixTime: now)
            } catch {
                if let failure { throw failure }
                throw error
            }
            if let failure { throw failure }
            for (uid, units) in plan.take { try tx.decrementStock(productUID: uid, by: units) }
            let order = try tx.insertOrder(plan.order, session: holderKey)
            if !plan.soldOut.isEmpty {
                _ = try tx.bumpCatalogVersion(touching: plan.soldOut)
                batch.soldOut = true
            }
            let body = BodyEncoder.checkout(order)
            if !d.idempotencyKey.isEmpty {
                try tx.saveIdempotentAnswer(session: key, key: d.idempotencyKey,
                                            IdempotentAnswer(fingerprint: print, field: MethodField.checkout.rawValue, body: body))
            }
            try tx.releaseSavepoint()
            save(StoredCart(version: (cart?.version ?? 0) + 1, lines: []), key: holderKey, storeUID: d.storeUID, now, &batch)
            remember(key: key, d.idempotencyKey, print, .checkout, body, now, &batch)
            return .ok(.checkout, body)
        } catch {
            try tx.rollbackToSavepoint()
            throw error
        }
    }
}
