import GroserClient
import GroserSystem

extension Commands {
    static let storeOptions = [
        OptionSpec(name: "--city", valueName: "CODE", help: "the city whose default store's cart to use"),
        OptionSpec(name: "--store", valueName: "UID", help: "the store whose cart to use"),
    ]

    static let cart = Subcommand(
        name: "cart", usage: "cart [--accept-prices | add PRODUCT [--qty N] | set PRODUCT N | remove PRODUCT [--yes] | clear] [--city CODE | --store UID]",
        abstract: """
        Shows or changes the cart at a store (by default the saved city's default store).
          cart                      show the cart with line totals and the subtotal; looking changes
                                    nothing (a changed price stays marked until it is accepted)
          cart --accept-prices      show the cart and accept its changed prices (a new cart version)
          cart add PRODUCT          add one (or --qty N) of a product
          cart set PRODUCT N        set a line's quantity; 0 removes it
          cart remove PRODUCT       remove a line (asks first on a terminal; --yes skips the question)
          cart clear                empty the cart
        The session is opened on first use and saved beside the city, so carts continue across runs.
        """,
        options: storeOptions + [
            OptionSpec(name: "--qty", valueName: "N", help: "how many to add (default: 1)"),
            OptionSpec(name: "--yes", valueName: nil, help: "remove without asking"),
            OptionSpec(name: "--accept-prices", valueName: nil, help: "accept the changed prices the cart shows"),
            idempotencyKeyOption,
        ],
        validate: { (parsed, help) throws(UsageError) in
            let store = try StoreChoice(parsed, help: help)
            let words = parsed.positionals
            let accept = parsed.flags.contains("--accept-prices")
            let key = parsed.values["--idempotency-key"] ?? newKey()
            if accept && !words.isEmpty { throw UsageError("--accept-prices goes with cart alone, not with cart \(words[0])", help: help) }
            let qtyText = parsed.values["--qty"]
            func quantity(_ text: String) throws(UsageError) -> UInt32 {
                guard let n = UInt32(text) else { throw UsageError("\"\(text)\" is not a whole number of items", help: help) }
                return n
            }
            switch words.first {
            case nil:
                return { ctx in try withCart(ctx, store) { client, session, storeUID in
                    try client.cart(session: session, storeUID: storeUID, acceptPrices: accept)
                } }
            case "add":
                guard words.count == 2 else { throw UsageError("cart add needs exactly one product uid", help: help) }
                let n = try quantity(qtyText ?? "1")
                return { ctx in try withCart(ctx, store) { client, session, storeUID in
                    try retryable(key) { try client.addItem(mutation(session, storeUID, key), productUID: words[1], quantity: n) }
                } }
            case "set":
                guard words.count == 3 else { throw UsageError("cart set needs a product uid and a quantity", help: help) }
                let n = try quantity(words[2])
                return { ctx in try withCart(ctx, store) { client, session, storeUID in
                    try retryable(key) { try client.setQuantity(mutation(session, storeUID, key), productUID: words[1], quantity: n) }
                } }
            case "remove":
                guard words.count == 2 else { throw UsageError("cart remove needs exactly one product uid", help: help) }
                let yes = parsed.flags.contains("--yes")
                if !yes && !Terminal.inputIsTerminal {
                    throw UsageError("cart remove asks for confirmation, and there is no terminal to ask on; add --yes")
                }
                return { ctx in try withCart(ctx, store) { client, session, storeUID in
                    if !yes {
                        let current = try client.cart(session: session, storeUID: storeUID)
                        guard let line = current.lines.first(where: { $0.productUID == words[1] }) else {
                            throw GroserError.server(Status(.notFound, "The product \"\(words[1])\" is not in the cart."))
                        }
                        guard Terminal.confirm(TerminalText("Remove \(line.name) from the cart?").text) else {
                            throw Cancelled()
                        }
                    }
                    return try retryable(key) { try client.removeItem(mutation(session, storeUID, key), productUID: words[1]) }
                } }
            case "clear":
                guard words.count == 1 else { throw UsageError("cart clear takes no arguments", help: help) }
                return { ctx in try withCart(ctx, store) { client, session, storeUID in
                    try retryable(key) { try client.clearCart(mutation(session, storeUID, key)) }
                } }
            case let other?:
                throw UsageError("unknown cart action \"\(other)\" (add, set, remove, clear)", help: help)
            }
        })

    static let checkout = Subcommand(
        name: "checkout", usage: "checkout --exp MM/YY --name HOLDER --address ADDRESS [--expect-version N] [--card-from-stdin] [--city CODE | --store UID]",
        abstract: """
        Pays for the cart by card and places the order. The card number and then the CVC are read
        from a prompt with echo off, or with --card-from-stdin as the first and second lines of
        standard input; never from an argument. The order is for the cart as shown: the version
        `cart` printed (--expect-version N), else the cart checkout shows before asking for the
        card; a cart changed since is refused. If prices changed since they were accepted, checkout
        shows them and stops (exit 73); `cart --accept-prices` accepts them.
        """,
        options: storeOptions + [
            OptionSpec(name: "--exp", valueName: "MM/YY", help: "the card's expiry month and year (MM/YY or MM/YYYY)"),
            OptionSpec(name: "--name", valueName: "HOLDER", help: "the name on the card"),
            OptionSpec(name: "--address", valueName: "ADDRESS", help: "where to deliver"),
            OptionSpec(name: "--card-from-stdin", valueName: nil, help: "read the number and CVC from standard input"),
            OptionSpec(name: "--expect-version", valueName: "N", help: "the cart version the customer confirmed (as `cart` printed it)"),
            idempotencyKeyOption,
        ],
        validate: { (parsed, help) throws(UsageError) in
            let store = try StoreChoice(parsed, help: help)
            if let extra = parsed.positionals.first { throw UsageError("unexpected argument \"\(extra)\"", help: help) }
            guard let exp = parsed.values["--exp"], let holder = parsed.values["--name"],
                  let address = parsed.values["--address"] else {
                throw UsageError("checkout needs --exp, --name and --address", help: help)
            }
            let parts = exp.split(separator: "/")
            guard parts.count == 2, let month = UInt32(parts[0]), let year = UInt32(parts[1]),
                  parts[0].count <= 2, parts[1].count == 2 || parts[1].count == 4 else {
                throw UsageError("--exp must look like MM/YY or MM/YYYY, not \"\(exp)\"", help: help)
            }
            var expected: UInt64?
            if let text = parsed.values["--expect-version"] {
                guard let n = UInt64(text), n > 0 else { throw UsageError("--expect-version must be a cart version (1 or more), not \"\(text)\"", help: help) }
                expected = n
            }
            let fromStdin = parsed.flags.contains("--card-from-stdin")
            let key = parsed.values["--idempotency-key"] ?? newKey()
            if !fromStdin && !Terminal.inputIsTerminal {
                throw UsageError("no terminal to read the card from; pipe the number and CVC with --card-from-stdin", help: help)
            }
            return { ctx in
                try withSession(ctx, store) { client, session, storeUID in
                    let cart = try client.cart(session: session, storeUID: storeUID)
                    let changed = cart.lines.filter(\.priceChanged)
                    if !changed.isEmpty {
                        let list = changed.map { "\($0.name) \($0.previousPrice.map(HumanOutput.price) ?? "?") → \(HumanOutput.price($0.unitPrice))" }
                        throw GroserError.server(Status(.failedPrecondition,
                            "Prices changed since they were accepted: \(list.joined(separator: "; ")). "
                            + "Run 'groser-client cart --accept-prices' to accept them, then check out again."))
                    }
                    if let expected, expected != cart.version {
                        throw GroserError.server(Status(.aborted,
                            "The cart is at version \(cart.version), not \(expected); show it again with 'groser-client cart' and confirm it."))
                    }
                    let number: String?
                    let cvc: String?
                    if fromStdin {
                        number = Terminal.readLine()
                        cvc = Terminal.readLine()
                    } else {
                        StandardStreams.err(TerminalText("Paying \(HumanOutput.price(cart.subtotal)) for \(cart.itemCount) items at \(storeUID).\n").text)
                        number = Terminal.readSecret(prompt: "Card number: ")
                        cvc = Terminal.readSecret(prompt: "CVC: ")
                    }
                    guard let number, let cvc else {
                        throw UsageError("the card number and CVC were not given")
                    }
                    let order = try retryable(key) { try client.checkout(CheckoutDetails(
                        session: session, storeUID: storeUID, expectedVersion: expected ?? cart.version, deliveryAddress: address,
                        card: PaymentCard(number: number, expiryMonth: month, expiryYear: year, cvc: cvc, holderName: holder),
                        idempotencyKey: key)) }
                    ctx.print(.checkout(order),
                              human: "Order \(order.number) placed.\n\(HumanOutput.order(order))")
                }
            }
        })

    static let orders = Subcommand(
        name: "orders", usage: "orders [--json]",
        abstract: "Lists this session's orders, newest first.",
        validate: { (parsed, help) throws(UsageError) in
            if let extra = parsed.positionals.first { throw UsageError("unexpected argument \"\(extra)\"", help: help) }
            return { ctx in
                let client = ctx.client()
                let settings = try ClientSettings.load(from: ctx.settingsPath)
                guard let session = ctx.savedSession(settings, client) else {
                    ctx.print(.listOrders([]), human: "No orders yet.\n")
                    return
                }
                let orders = try client.orders(session: session)
                ctx.print(.listOrders(orders),
                          human: orders.isEmpty ? "No orders yet.\n"
                                                : TerminalText.joined(orders.map(HumanOutput.order), separator: "\n"))
            }
        })

    static let admin = Subcommand(
        name: "admin", usage: "admin set-product PRODUCT [--price AMOUNT] [--stock N] | import FILE [--replace] | export [--store UID] [--output FILE]",
        abstract: """
        Operators: set-product changes a product's price (in the currency's units, e.g. 89.90) and/or stock;
        import streams a catalog file (docs/CATALOG.md) into groserd, all or nothing; export writes the catalog
        (or one store) in the same format. Only groserd's own user, root and --admin-group members may;
        others get PERMISSION_DENIED (exit 71). A refused import file exits 67 and changes nothing.
        """,
        options: [
            OptionSpec(name: "--price", valueName: "AMOUNT", help: "set-product: the new price, e.g. 89.90"),
            OptionSpec(name: "--stock", valueName: "N", help: "set-product: the new stock count"),
            OptionSpec(name: "--replace", valueName: nil, help: "import: also remove what the file does not name in the stores it covers"),
            OptionSpec(name: "--store", valueName: "UID", help: "export: only this store (and its city)"),
            OptionSpec(name: "--output", valueName: "FILE", help: "export: write to FILE instead of standard output"),
        ],
        validate: { (parsed, help) throws(UsageError) in
            switch parsed.positionals.first {
            case "import":
                guard parsed.positionals.count == 2 else { throw UsageError("admin import needs: import FILE [--replace]", help: help) }
                let path = parsed.positionals[1]
                let replace = parsed.flags.contains("--replace")
                return { ctx in try CatalogTransfer.importFile(path, replace: replace, ctx) }
            case "export":
                guard parsed.positionals.count == 1 else { throw UsageError("admin export takes no file; use --output FILE", help: help) }
                let store = parsed.values["--store"] ?? ""
                let output = parsed.values["--output"]
                return { ctx in try CatalogTransfer.export(store: store, output: output, ctx) }
            case "set-product":
                break
            default:
                throw UsageError("admin needs: set-product PRODUCT [--price AMOUNT] [--stock N], import FILE or export", help: help)
            }
            guard parsed.positionals.count == 2 else {
                throw UsageError("admin needs: set-product PRODUCT [--price AMOUNT] [--stock N]", help: help)
            }
            let product = parsed.positionals[1]
            var price: Int64?
            if let text = parsed.values["--price"] {
                guard let minor = parseAmount(text) else {
                    throw UsageError("--price must be an amount like 89.90, not \"\(text)\"", help: help)
                }
                price = minor
            }
            var stock: UInt32?
            if let text = parsed.values["--stock"] {
                guard let n = UInt32(text) else { throw UsageError("--stock must be a whole number, not \"\(text)\"", help: help) }
                stock = n
            }
            guard price != nil || stock != nil else { throw UsageError("give --price, --stock or both", help: help) }
            return { ctx in
                let r = try ctx.client().setProduct(ProductUpdate(productUID: product, priceMinorUnits: price, stock: stock))
                ctx.print(.setProduct(r),
                          human: "\(r.product.name): \(HumanOutput.price(r.product.price)), stock \(r.stock) · catalog version \(r.catalogVersion)\n")
            }
        })
}

/// The person answered no.
struct Cancelled: Error {}

/// Which store a cart command means.
struct StoreChoice: Sendable {
    var city: String?
    var store: String?

    init(_ parsed: ParsedArguments, help: String) throws(UsageError) {
        city = parsed.values["--city"]
        store = parsed.values["--store"]
        if city != nil && store != nil { throw UsageError("give --city or --store, not both", help: help) }
    }

    /// The store's uid: given, or the default store of the given or saved city.
    func resolve(_ client: GroserClient, settings: ClientSettings) throws -> String {
        if let store { return store }
        guard let code = city ?? settings.cityCode else {
            throw UsageError("no store given and no city saved; use --city CODE, --store UID or set-city CODE")
        }
        let cities = try client.listCities().cities
        guard let c = cities.first(where: { $0.code.uppercased() == code.uppercased() }) else {
            throw GroserError.server(Status(.notFound, "No city has the code \"\(code)\"."))
        }
        return c.defaultStoreUID
    }
}

/// A fresh idempotency key, so a retried mutation is applied once.
func newKey() -> String { (try? KernelRandom.hex(12)) ?? "" }

func mutation(_ session: String, _ storeUID: String, _ key: String) -> CartMutation {
    CartMutation(session: session, storeUID: storeUID, idempotencyKey: key)
}

/// Runs a mutation sent with idempotency key `key`; when no answer came
/// (a timeout or a broken connection), says that it may have been applied
/// and how to retry it exactly, then fails as it would have.
func retryable<T>(_ key: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as GroserError {
        switch error {
        case .timedOut, .transport, .cancelled:
            StandardStreams.err("groser-client: no answer came, so the change may have been applied; "
                                + "to retry it exactly (applied at most once), run the same command with --idempotency-key \(key)\n")
        default: break
        }
        throw error
    }
}

/// The option every mutating command takes to resend a change exactly.
let idempotencyKeyOption = OptionSpec(name: "--idempotency-key", valueName: "KEY",
                                      help: "send the change with this key: a retry of a change that may have been applied")

/// "89.90" → 8990 minor units; nil for anything else.
func parseAmount(_ text: String) -> Int64? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count <= 2, let units = Int64(parts[0]), units >= 0, !parts[0].hasPrefix("+") else { return nil }
    var cents: Int64 = 0
    if parts.count == 2 {
        let f = parts[1]
        guard (1...2).contains(f.count), f.allSatisfy(\.isNumber), let v = Int64(f) else { return nil }
        cents = f.count == 1 ? v * 10 : v
    }
    let (scaled, o1) = units.multipliedReportingOverflow(by: 100)
    let (total, o2) = scaled.addingReportingOverflow(cents)
    return o1 || o2 ? nil : total
}

/// Runs `body` with the session saved for this daemon's socket (opening
/// and saving one on first use, or when groserd no longer knows the saved
/// one) and the chosen store. Sessions of other daemons are left alone.
func withSession(_ ctx: Context, _ choice: StoreChoice,
                 _ body: (GroserClient, String, String) throws -> Void) throws {
    let client = ctx.client()
    let settings = try ClientSettings.load(from: ctx.settingsPath)
    let storeUID = try choice.resolve(client, settings: settings)
    let saved = ctx.savedSession(settings, client)
    func fresh() throws -> String {
        let token = try client.openSession()
        try ClientSettings.update(at: ctx.settingsPath) { $0.sessions[client.socketPath] = token }
        return token
    }
    let session = try saved ?? fresh()
    do {
        try body(client, session, storeUID)
    } catch GroserError.server(let status) where status.code == .unauthenticated && saved == session {
        StandardStreams.err(TerminalText("groser-client: groserd at \(client.socketPath) does not know the session saved for it; opened a new one\n").text)
        try body(client, try fresh(), storeUID)
    }
}

/// `withSession` for commands that print the resulting cart.
func withCart(_ ctx: Context, _ choice: StoreChoice,
              _ body: @escaping (GroserClient, String, String) throws -> Cart) throws {
    try withSession(ctx, choice) { client, session, storeUID in
        let cart = try body(client, session, storeUID)
        ctx.print(.cart(cart), human: HumanOutput.cart(cart))
    }
}
