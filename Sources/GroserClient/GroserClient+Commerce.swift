import GroserSystem

/// Sessions, carts, checkout, orders and the operators' catalog update.
extension GroserClient {
    /// Opens an anonymous customer session; keep the token secret.
    public func openSession(timeout: Double? = nil) throws(GroserError) -> String {
        guard case .openSession(let token) = try call(.openSession, timeout: timeout) else { throw Self.mismatch("OpenSession") }
        return token
    }

    /// The session's cart at a store (empty, version 0, when there is none).
    /// Looking changes nothing: lines whose price changed since the customer
    /// saw it are marked `priceChanged`, and Checkout refuses them until a
    /// call with `acceptPrices` makes the shown prices the seen ones (and
    /// moves the cart to a new version, which Checkout then expects).
    public func cart(session: String, storeUID: String, acceptPrices: Bool = false,
                     timeout: Double? = nil) throws(GroserError) -> Cart {
        try cartCall(.getCart(session: session, storeUID: storeUID, acceptPrices: acceptPrices), "GetCart", timeout)
    }

    /// Adds `quantity` of a product to its line (a new line if there is none).
    public func addItem(_ cart: CartMutation, productUID: String, quantity: UInt32 = 1,
                        timeout: Double? = nil) throws(GroserError) -> Cart {
        try cartCall(.addItem(cart, productUID: productUID, quantity: quantity), "AddItem", timeout)
    }

    /// Sets a line's quantity; 0 removes it.
    public func setQuantity(_ cart: CartMutation, productUID: String, quantity: UInt32,
                            timeout: Double? = nil) throws(GroserError) -> Cart {
        try cartCall(.setQuantity(cart, productUID: productUID, quantity: quantity), "SetQuantity", timeout)
    }

    /// Removes a product's line.
    public func removeItem(_ cart: CartMutation, productUID: String, timeout: Double? = nil) throws(GroserError) -> Cart {
        try cartCall(.removeItem(cart, productUID: productUID), "RemoveItem", timeout)
    }

    /// Empties the cart.
    public func clearCart(_ cart: CartMutation, timeout: Double? = nil) throws(GroserError) -> Cart {
        try cartCall(.clearCart(cart), "ClearCart", timeout)
    }

    /// Places an order for the cart at the version the customer confirmed.
    public func checkout(_ details: CheckoutDetails, timeout: Double? = nil) throws(GroserError) -> Order {
        guard case .checkout(let order) = try call(.checkout(details), timeout: timeout) else { throw Self.mismatch("Checkout") }
        return order
    }

    /// The session's orders, newest first.
    public func orders(session: String, timeout: Double? = nil) throws(GroserError) -> [Order] {
        guard case .listOrders(let orders) = try call(.listOrders(session: session), timeout: timeout) else {
            throw Self.mismatch("ListOrders")
        }
        return orders
    }

    /// Operators only: changes a product's price and/or stock.
    public func setProduct(_ update: ProductUpdate, timeout: Double? = nil) throws(GroserError) -> ProductUpdateResult {
        guard case .setProduct(let result) = try call(.setProduct(update), timeout: timeout) else { throw Self.mismatch("SetProduct") }
        return result
    }

    private func cartCall(_ method: RequestMethod, _ name: String, _ timeout: Double?) throws(GroserError) -> Cart {
        guard case .cart(let cart) = try call(method, timeout: timeout) else { throw Self.mismatch(name) }
        return cart
    }

    // MARK: Async

    /// Opens an anonymous customer session; keep the token secret.
    public func openSession(timeout: Duration? = nil) async throws(GroserError) -> String {
        try await answer(.openSession, timeout, "OpenSession") { if case .openSession(let v) = $0 { v } else { nil } }
    }

    /// The session's cart at a store; `acceptPrices` accepts changed prices
    /// (see the blocking `cart(session:storeUID:acceptPrices:timeout:)`).
    public func cart(session: String, storeUID: String, acceptPrices: Bool = false,
                     timeout: Duration? = nil) async throws(GroserError) -> Cart {
        try await cartCall(.getCart(session: session, storeUID: storeUID, acceptPrices: acceptPrices), "GetCart", timeout)
    }

    /// Adds `quantity` of a product to its line (a new line if there is none).
    public func addItem(_ cart: CartMutation, productUID: String, quantity: UInt32 = 1,
                        timeout: Duration? = nil) async throws(GroserError) -> Cart {
        try await cartCall(.addItem(cart, productUID: productUID, quantity: quantity), "AddItem", timeout)
    }

    /// Sets a line's quantity; 0 removes it.
    public func setQuantity(_ cart: CartMutation, productUID: String, quantity: UInt32,
                            timeout: Duration? = nil) async throws(GroserError) -> Cart {
        try await cartCall(.setQuantity(cart, productUID: productUID, quantity: quantity), "SetQuantity", timeout)
    }

    /// Removes a product's line.
    public func removeItem(_ cart: CartMutation, productUID: String, timeout: Duration? = nil) async throws(GroserError) -> Cart {
        try await cartCall(.removeItem(cart, productUID: productUID), "RemoveItem", timeout)
    }

    /// Empties the cart.
    public func clearCart(_ cart: CartMutation, timeout: Duration? = nil) async throws(GroserError) -> Cart {
        try await cartCall(.clearCart(cart), "ClearCart", timeout)
    }

    /// Places an order for the cart at the version the customer confirmed.
    public func checkout(_ details: CheckoutDetails, timeout: Duration? = nil) async throws(GroserError) -> Order {
        try await answer(.checkout(details), timeout, "Checkout") { if case .checkout(let v) = $0 { v } else { nil } }
    }

    /// The session's orders, newest first.
    public func orders(session: String, timeout: Duration? = nil) async throws(GroserError) -> [Order] {
        try await answer(.listOrders(session: session), timeout, "ListOrders") { if case .listOrders(let v) = $0 { v } else { nil } }
    }

    /// Operators only: changes a product's price and/or stock.
    public func setProduct(_ update: ProductUpdate, timeout: Duration? = nil) async throws(GroserError) -> ProductUpdateResult {
        try await answer(.setProduct(update), timeout, "SetProduct") { if case .setProduct(let v) = $0 { v } else { nil } }
    }

    private func cartCall(_ method: RequestMethod, _ name: String, _ timeout: Duration?) async throws(GroserError) -> Cart {
        try await answer(method, timeout, name) { if case .cart(let v) = $0 { v } else { nil } }
    }
}
