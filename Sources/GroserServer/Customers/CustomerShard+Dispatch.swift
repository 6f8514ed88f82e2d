import GroserStorage
import GroserSystem
import GroserWire

/// One request of a batch, sent to its rule: the deadline, the method
/// switch, and the refusals turned into answers.
extension CustomerShard {
    /// Answers one request of the batch. The job is read in place through
    /// its pointer: passed as a value (even `borrowing`, out of the buffer)
    /// it was copied whole, about 480 instructions a request.
    func handle(_ j: UnsafePointer<ShardJob>, _ catalog: EncodedCatalog, _ now: Int64, _ batch: inout Batch,
                        _ tx: (any CommerceTransaction)?) -> CommerceOutcome {
        if let call = j.pointee.step {
            // Steps never expire: a login that sealed a guest finishes its merge.
            do {
                batch.side = .step(try runStep(call.step, now, &batch))
                return .ok(.login, [])
            } catch {
                return .failed(error.status)
            }
        }
        if let refusal = Dispatcher.deadlineRefusal(j.pointee.job.request, receivedAt: j.pointee.job.receivedAt, wording: .brief) {
            return .failed(refusal)
        }
        lookupFailure = nil
        do {
            // A request changes the state only once nothing can refuse it.
            return try run(j, catalog, now, &batch, tx)
        } catch let refusal as Refusal {
            if let failure = lookupFailure { return .failed(Status(.unavailable, "The store failed: \(failure.description).")) }
            // A token from OpenSession whose session nothing stored yet.
            if refusal == Self.unknownSession, let key = j.pointee.key { return unstored(j, key, catalog, now, &batch, tx) }
            return .failed(refusal.status)
        } catch let error as StorageError {
            return .failed(Status(.unavailable, "The store failed: \(error.description)."))
        } catch {
            return .failed(Status(.internal, "Unexpected error: \(error)."))
        }
    }

    /// The request's rule.
    private func run(_ j: UnsafePointer<ShardJob>, _ catalog: EncodedCatalog, _ now: Int64,
                     _ batch: inout Batch, _ tx: (any CommerceTransaction)?) throws -> CommerceOutcome {
        // One copy of the method, read by both (each read through the job's
        // pointer copied the whole request, its strings retained and released).
        let method = j.pointee.job.request.method
        if let refusal = FieldLimits.violation(in: method) { throw refusal }
        let id = j.pointee.job.request.id, key = j.pointee.key
        let rules = context.rules
        switch method {
        case .getCart(_, let storeUID, let acceptPrices):
            let (_, _, key, session) = try cartHolder(key)
            try checkStore(storeUID, catalog)
            guard let cart = session.carts[storeUID] else { return .ok(.getCart, BodyEncoder.cart(rules.emptyCart(storeUID))) }
            let look = lookup()
            let shown = try rules.view(cart, storeUID: storeUID, look)
            try checkLookups()
            // Lines of products the catalog no longer sells (a replacing
            // import) go, and the cart moves to a new version: the catalog
            // changed the cart, not this read.
            if shown.lines.count < cart.lines.count {
                var next = (acceptPrices ? rules.acknowledgingPrices(cart, shown: shown) : nil) ?? cart
                CartRules.keepShown(&next.lines, shown.lines)
                next.version = cart.version + 1
                save(next, key: key, storeUID: storeUID, now, &batch)
                var s = shown
                s.version = next.version
                return .ok(.getCart, BodyEncoder.cart(s))
            }
            // Seeing a changed price is not accepting it: only a GetCart
            // that asks (accept_prices) makes the shown prices the seen ones.
            if acceptPrices, let acknowledged = rules.acknowledgingPrices(cart, shown: shown) {
                save(acknowledged, key: key, storeUID: storeUID, now, &batch)
                var s = shown
                s.version = acknowledged.version
                return .ok(.getCart, BodyEncoder.cart(s))
            }
            return .ok(.getCart, BodyEncoder.cart(shown))

        case .addItem(let m, let product, let quantity):
            return try mutate(.addItem, id, m, fingerprint: "add|\(product)|\(quantity)", key, catalog, now, &batch, product: product) { cart, look, line throws(Refusal) in
                try rules.addEdit(cart, product: product, quantity: quantity, storeUID: m.storeUID, look, line: line)
            }
        case .setQuantity(let m, let product, let quantity):
            return try mutate(.setQuantity, id, m, fingerprint: "set|\(product)|\(quantity)", key, catalog, now, &batch, product: product) { cart, look, line throws(Refusal) in
                try rules.setQuantityEdit(cart, product: product, quantity: quantity, storeUID: m.storeUID, look, line: line)
            }
        case .removeItem(let m, let product):
            return try mutate(.removeItem, id, m, fingerprint: "remove|\(product)", key, catalog, now, &batch, product: product) { cart, _, line throws(Refusal) in
                try rules.removeEdit(cart, product: product, line: line)
            }
        case .clearCart(let m):
            return try mutate(.clearCart, id, m, fingerprint: "clear", key, catalog, now, &batch) { _, _, _ in .clear }

        case .checkout(let d):
            guard let tx else { throw Refusal(.internal, "Checkout reached a shard without the order store.") }
            return try checkout(d, key, catalog, now, &batch, tx)

        case .listOrders:
            let (_, holderKey) = try cartHolderKeys(key)
            guard let tx else { throw Refusal(.internal, "ListOrders reached a shard without the order store.") }
            return .ok(.listOrders, BodyEncoder.listOrders(try tx.orders(session: holderKey)))

        case .logout:
            let (key, owner) = try checkSessionKey(key)
            guard owner != nil else {
                throw Refusal(.failedPrecondition, "The session is anonymous: there is no login to end (its carts stay).")
            }
            put(nil, for: key, &batch)
            batch.records.append(.sessionRemoved(key))
            return .ok(.logout, BodyEncoder.logout())

        case .whoAmI:
            let (_, session, _, holder) = try cartHolder(key)
            return .ok(.whoAmI, BodyEncoder.whoAmI(Identity(account: holder.account.map(Account.init),
                                                            sessionCreatedAtUnix: session.createdAtUnix)))

        default:
            throw Refusal(.unimplemented, "The cart service does not answer this method.")
        }
    }

    func checkStore(_ storeUID: String, _ catalog: EncodedCatalog) throws(Refusal) {
        guard !storeUID.isEmpty else { throw Refusal(.invalidArgument, "The request names no store.") }
        // The batch's requests mostly name one store: the last store found
        // in this batch's catalog is compared, not hashed and looked up again.
        if storeUID == knownStore.uid, catalog.version == knownStore.catalogVersion { return }
        guard catalog.stores[storeUID] != nil else { throw Refusal(.notFound, "No store has the uid \"\(clip(storeUID))\".") }
        knownStore = (storeUID, catalog.version)
    }
}
