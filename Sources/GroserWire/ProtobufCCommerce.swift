import CGroserProto
import CProtobufC

// protobuf-c conversion of the cart, checkout and admin messages. Like
// ProtobufC.swift, no C pointer leaves this file's functions.

extension Arena {
    func optionalMoney(_ m: Money?) -> UnsafeMutablePointer<Groser__V1__Money>? { m.map(money) }

    func cartMutation(_ v: CartMutation) -> UnsafeMutablePointer<Groser__V1__CartMutation> {
        message(Groser__V1__CartMutation.self) { p in
            groser__v1__cart_mutation__init(p)
            p.pointee.session = string(v.session)
            p.pointee.store_uid = string(v.storeUID)
            p.pointee.idempotency_key = string(v.idempotencyKey)
            p.pointee.expected_version = v.expectedVersion
        }
    }

    func cartLine(_ v: CartLine) -> UnsafeMutablePointer<Groser__V1__CartLine> {
        message(Groser__V1__CartLine.self) { p in
            groser__v1__cart_line__init(p)
            p.pointee.product_uid = string(v.productUID)
            p.pointee.name = string(v.name)
            p.pointee.unit_price = money(v.unitPrice)
            p.pointee.quantity = v.quantity
            p.pointee.line_total = money(v.lineTotal)
            p.pointee.price_changed = v.priceChanged ? 1 : 0
            p.pointee.previous_price = optionalMoney(v.previousPrice)
            p.pointee.out_of_stock = v.outOfStock ? 1 : 0
        }
    }

    func cart(_ v: Cart) -> UnsafeMutablePointer<Groser__V1__Cart> {
        message(Groser__V1__Cart.self) { p in
            groser__v1__cart__init(p)
            p.pointee.store_uid = string(v.storeUID)
            p.pointee.n_lines = v.lines.count
            p.pointee.lines = array(v.lines.map(cartLine))
            p.pointee.subtotal = money(v.subtotal)
            p.pointee.item_count = v.itemCount
            p.pointee.currency = string(v.currency)
            p.pointee.version = v.version
        }
    }

    func card(_ v: PaymentCard) -> UnsafeMutablePointer<Groser__V1__Card> {
        message(Groser__V1__Card.self) { p in
            groser__v1__card__init(p)
            p.pointee.number = string(v.number)
            p.pointee.expiry_month = v.expiryMonth
            p.pointee.expiry_year = v.expiryYear
            p.pointee.cvc = string(v.cvc)
            p.pointee.holder_name = string(v.holderName)
        }
    }

    func orderLine(_ v: OrderLine) -> UnsafeMutablePointer<Groser__V1__OrderLine> {
        message(Groser__V1__OrderLine.self) { p in
            groser__v1__order_line__init(p)
            p.pointee.product_uid = string(v.productUID)
            p.pointee.name = string(v.name)
            p.pointee.unit_price = money(v.unitPrice)
            p.pointee.quantity = v.quantity
            p.pointee.line_total = money(v.lineTotal)
        }
    }

    func order(_ v: Order) -> UnsafeMutablePointer<Groser__V1__Order> {
        message(Groser__V1__Order.self) { p in
            groser__v1__order__init(p)
            p.pointee.number = string(v.number)
            p.pointee.store_uid = string(v.storeUID)
            p.pointee.city_code = string(v.cityCode)
            p.pointee.n_lines = v.lines.count
            p.pointee.lines = array(v.lines.map(orderLine))
            p.pointee.total = money(v.total)
            p.pointee.card_brand = string(v.cardBrand)
            p.pointee.card_last4 = string(v.cardLast4)
            p.pointee.created_at_unix = v.createdAtUnix
            p.pointee.delivery_address = string(v.deliveryAddress)
            p.pointee.holder_name = string(v.holderName)
        }
    }

    /// Fills the request's method for the commerce methods; false for others.
    func commerceMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        switch method {
        case .openSession:
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_OPEN_SESSION
            p.pointee.open_session = message(Groser__V1__OpenSessionRequest.self) { groser__v1__open_session_request__init($0) }
        case .getCart(let session, let storeUID, let acceptPrices):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_GET_CART
            p.pointee.get_cart = message(Groser__V1__GetCartRequest.self) { g in
                groser__v1__get_cart_request__init(g)
                g.pointee.session = string(session)
                g.pointee.store_uid = string(storeUID)
                g.pointee.accept_prices = protobuf_c_boolean(acceptPrices ? 1 : 0)
            }
        case .addItem(let m, let product, let quantity):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_ADD_ITEM
            p.pointee.add_item = message(Groser__V1__AddItemRequest.self) { g in
                groser__v1__add_item_request__init(g)
                g.pointee.cart = cartMutation(m)
                g.pointee.product_uid = string(product)
                g.pointee.quantity = quantity
            }
        case .setQuantity(let m, let product, let quantity):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_SET_QUANTITY
            p.pointee.set_quantity = message(Groser__V1__SetQuantityRequest.self) { g in
                groser__v1__set_quantity_request__init(g)
                g.pointee.cart = cartMutation(m)
                g.pointee.product_uid = string(product)
                g.pointee.quantity = quantity
            }
        case .removeItem(let m, let product):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_REMOVE_ITEM
            p.pointee.remove_item = message(Groser__V1__RemoveItemRequest.self) { g in
                groser__v1__remove_item_request__init(g)
                g.pointee.cart = cartMutation(m)
                g.pointee.product_uid = string(product)
            }
        case .clearCart(let m):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_CLEAR_CART
            p.pointee.clear_cart = message(Groser__V1__ClearCartRequest.self) { g in
                groser__v1__clear_cart_request__init(g)
                g.pointee.cart = cartMutation(m)
            }
        case .checkout(let d):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_CHECKOUT
            p.pointee.checkout = message(Groser__V1__CheckoutRequest.self) { g in
                groser__v1__checkout_request__init(g)
                g.pointee.session = string(d.session)
                g.pointee.store_uid = string(d.storeUID)
                g.pointee.expected_version = d.expectedVersion
                g.pointee.delivery_address = string(d.deliveryAddress)
                g.pointee.card = card(d.card)
                g.pointee.idempotency_key = string(d.idempotencyKey)
            }
        case .listOrders(let session):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LIST_ORDERS
            p.pointee.list_orders = message(Groser__V1__ListOrdersRequest.self) { g in
                groser__v1__list_orders_request__init(g)
                g.pointee.session = string(session)
            }
        case .setProduct(let u):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_SET_PRODUCT
            p.pointee.set_product = message(Groser__V1__SetProductRequest.self) { g in
                groser__v1__set_product_request__init(g)
                g.pointee.product_uid = string(u.productUID)
                if let price = u.priceMinorUnits {
                    g.pointee.new_price_case = GROSER__V1__SET_PRODUCT_REQUEST__NEW_PRICE_PRICE_MINOR_UNITS
                    g.pointee.price_minor_units = price
                }
                if let stock = u.stock {
                    g.pointee.new_stock_case = GROSER__V1__SET_PRODUCT_REQUEST__NEW_STOCK_STOCK
                    g.pointee.stock = stock
                }
            }
        default:
            return false
        }
        return true
    }
}

func decodeCartMutation(_ p: UnsafeMutablePointer<Groser__V1__CartMutation>?) -> CartMutation {
    guard let c = p?.pointee else { return CartMutation(session: "", storeUID: "") }
    return CartMutation(session: str(c.session), storeUID: str(c.store_uid),
                        idempotencyKey: str(c.idempotency_key), expectedVersion: c.expected_version)
}

/// The commerce method of an unpacked request, or nil for another method.
func decodeCommerceMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    switch c.method_case {
    case GROSER__V1__REQUEST__METHOD_OPEN_SESSION:
        return .openSession
    case GROSER__V1__REQUEST__METHOD_GET_CART:
        let g = c.get_cart.pointee
        return .getCart(session: str(g.session), storeUID: str(g.store_uid), acceptPrices: g.accept_prices != 0)
    case GROSER__V1__REQUEST__METHOD_ADD_ITEM:
        let g = c.add_item.pointee
        return .addItem(decodeCartMutation(g.cart), productUID: str(g.product_uid), quantity: g.quantity)
    case GROSER__V1__REQUEST__METHOD_SET_QUANTITY:
        let g = c.set_quantity.pointee
        return .setQuantity(decodeCartMutation(g.cart), productUID: str(g.product_uid), quantity: g.quantity)
    case GROSER__V1__REQUEST__METHOD_REMOVE_ITEM:
        let g = c.remove_item.pointee
        return .removeItem(decodeCartMutation(g.cart), productUID: str(g.product_uid))
    case GROSER__V1__REQUEST__METHOD_CLEAR_CART:
        return .clearCart(decodeCartMutation(c.clear_cart.pointee.cart))
    case GROSER__V1__REQUEST__METHOD_CHECKOUT:
        let g = c.checkout.pointee
        let card = g.card?.pointee
        return .checkout(CheckoutDetails(
            session: str(g.session), storeUID: str(g.store_uid), expectedVersion: g.expected_version,
            deliveryAddress: str(g.delivery_address),
            card: PaymentCard(number: str(card?.number), expiryMonth: card?.expiry_month ?? 0,
                              expiryYear: card?.expiry_year ?? 0, cvc: str(card?.cvc),
                              holderName: str(card?.holder_name)),
            idempotencyKey: str(g.idempotency_key)))
    case GROSER__V1__REQUEST__METHOD_LIST_ORDERS:
        return .listOrders(session: str(c.list_orders.pointee.session))
    case GROSER__V1__REQUEST__METHOD_SET_PRODUCT:
        let g = c.set_product.pointee
        return .setProduct(ProductUpdate(
            productUID: str(g.product_uid),
            priceMinorUnits: g.new_price_case == GROSER__V1__SET_PRODUCT_REQUEST__NEW_PRICE_PRICE_MINOR_UNITS ? g.price_minor_units : nil,
            stock: g.new_stock_case == GROSER__V1__SET_PRODUCT_REQUEST__NEW_STOCK_STOCK ? g.stock : nil))
    default:
        return nil
    }
}

private func cartLine(_ p: UnsafeMutablePointer<Groser__V1__CartLine>) -> CartLine {
    let c = p.pointee
    return CartLine(productUID: str(c.product_uid), name: str(c.name), unitPrice: money(c.unit_price),
                    quantity: c.quantity, lineTotal: money(c.line_total), priceChanged: c.price_changed != 0,
                    previousPrice: c.previous_price.map { money($0) }, outOfStock: c.out_of_stock != 0)
}

private func cart(_ p: UnsafeMutablePointer<Groser__V1__Cart>?) -> Cart {
    guard let c = p?.pointee else {
        return Cart(storeUID: "", lines: [], subtotal: Money(minorUnits: 0, currency: ""), itemCount: 0, currency: "", version: 0)
    }
    return Cart(storeUID: str(c.store_uid), lines: items(c.lines, c.n_lines).map(cartLine), subtotal: money(c.subtotal),
                itemCount: c.item_count, currency: str(c.currency), version: c.version)
}

private func orderLine(_ p: UnsafeMutablePointer<Groser__V1__OrderLine>) -> OrderLine {
    let c = p.pointee
    return OrderLine(productUID: str(c.product_uid), name: str(c.name), unitPrice: money(c.unit_price),
                     quantity: c.quantity, lineTotal: money(c.line_total))
}

private func order(_ p: UnsafeMutablePointer<Groser__V1__Order>?) -> Order {
    guard let c = p?.pointee else {
        return Order(number: "", storeUID: "", cityCode: "", lines: [], total: Money(minorUnits: 0, currency: ""),
                     cardBrand: "", cardLast4: "", createdAtUnix: 0, deliveryAddress: "", holderName: "")
    }
    return Order(number: str(c.number), storeUID: str(c.store_uid), cityCode: str(c.city_code),
                 lines: items(c.lines, c.n_lines).map(orderLine), total: money(c.total), cardBrand: str(c.card_brand),
                 cardLast4: str(c.card_last4), createdAtUnix: c.created_at_unix,
                 deliveryAddress: str(c.delivery_address), holderName: str(c.holder_name))
}

/// The commerce body of an unpacked response, or nil for another body.
func decodeCommerceBody(_ c: Groser__V1__Response) -> ResponseBody? {
    switch c.body_case {
    case GROSER__V1__RESPONSE__BODY_OPEN_SESSION:
        return .openSession(session: str(c.open_session.pointee.session))
    case GROSER__V1__RESPONSE__BODY_GET_CART: return .cart(cart(c.get_cart.pointee.cart))
    case GROSER__V1__RESPONSE__BODY_ADD_ITEM: return .cart(cart(c.add_item.pointee.cart))
    case GROSER__V1__RESPONSE__BODY_SET_QUANTITY: return .cart(cart(c.set_quantity.pointee.cart))
    case GROSER__V1__RESPONSE__BODY_REMOVE_ITEM: return .cart(cart(c.remove_item.pointee.cart))
    case GROSER__V1__RESPONSE__BODY_CLEAR_CART: return .cart(cart(c.clear_cart.pointee.cart))
    case GROSER__V1__RESPONSE__BODY_CHECKOUT: return .checkout(order(c.checkout.pointee.order))
    case GROSER__V1__RESPONSE__BODY_LIST_ORDERS:
        let b = c.list_orders.pointee
        return .listOrders(items(b.orders, b.n_orders).map { order($0) })
    case GROSER__V1__RESPONSE__BODY_SET_PRODUCT:
        let b = c.set_product.pointee
        return .setProduct(ProductUpdateResult(product: b.product.map(product) ?? product(nil),
                                               stock: b.stock, catalogVersion: b.catalog_version))
    default:
        return nil
    }
}

extension BodyEncoder {
    public static func openSession(_ session: String) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__OpenSessionResponse.self) { p in
                groser__v1__open_session_response__init(p)
                p.pointee.session = arena.string(session)
            }
        }
    }

    /// The CartResponse body (the same message for GetCart and every mutation).
    public static func cart(_ v: Cart) -> [UInt8] { CartBodyWriter.cartResponse(v) }

    /// The same body from a cart's parts, its lines in any `CartLineFields`
    /// form: the bytes `cart(_:)` writes for the `Cart` of those parts.
    @inlinable
    public static func cart<L: CartLineFields>(storeUID: String, lines: [L], subtotal: Money, itemCount: UInt32,
                                               currency: String, version: UInt64) -> [UInt8] {
        CartBodyWriter.cartResponse(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount,
                                    currency: currency, version: version)
    }

    /// The whole OK response frame (request `id`, method `field`) around
    /// that body, in one allocation: for an answer that goes out alone.
    @inlinable
    public static func cartFrame<L: CartLineFields>(id: UInt64, field: MethodField, storeUID: String, lines: [L], subtotal: Money,
                                                    itemCount: UInt32, currency: String, version: UInt64) -> [UInt8] {
        CartBodyWriter.cartResponse(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount,
                                    currency: currency, version: version, frame: (id, field))
    }

    /// The same body through protobuf-c: what `cart(_:)` is checked against.
    static func cartThroughProtobufC(_ v: Cart) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__CartResponse.self) { p in
                groser__v1__cart_response__init(p)
                p.pointee.cart = arena.cart(v)
            }
        }
    }

    public static func checkout(_ v: Order) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__CheckoutResponse.self) { p in
                groser__v1__checkout_response__init(p)
                p.pointee.order = arena.order(v)
            }
        }
    }

    public static func listOrders(_ v: [Order]) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ListOrdersResponse.self) { p in
                groser__v1__list_orders_response__init(p)
                p.pointee.n_orders = v.count
                p.pointee.orders = arena.array(v.map(arena.order))
            }
        }
    }

    public static func setProduct(_ v: ProductUpdateResult) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__SetProductResponse.self) { p in
                groser__v1__set_product_response__init(p)
                p.pointee.product = arena.product(v.product)
                p.pointee.stock = v.stock
                p.pointee.catalog_version = v.catalogVersion
            }
        }
    }
}
