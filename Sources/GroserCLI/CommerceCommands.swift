import GroserClient
import GroserCommandLine
import GroserSystem

// groser-client's cart, checkout, orders and admin commands.

extension Commands {
    static let storeOptions = [
        OptionSpec(name: "--city", valueName: "CODE", help: "the city whose default store's cart to use"),
        OptionSpec(name: "--store", valueName: "UID", help: "the store whose cart to use"),
    ]

    private static func quantity(_ text: String) throws(UsageError) -> UInt32 {
        guard let n = UInt32(text) else { throw UsageError("\"\(text)\" is not a whole number of items") }
        return n
    }

    /// cart add and cart set: the store, the product (the first argument),
    /// the quantity in `text` and the idempotency key, read before anything
    /// is sent; then `change` of the session's cart, retried by that key.
    private static func lineChange(_ parsed: ParsedArguments, quantity text: String,
                                   _ change: @escaping (GroserClient, CartMutation, String, UInt32) throws -> Cart)
        throws(UsageError) -> ClientAction {
        let store = try StoreChoice(parsed)
        let product = parsed.positionals[0]
        let n = try quantity(text)
        let key = parsed.values["--idempotency-key"] ?? newKey()
        return { ctx in try withCart(ctx, store) { client, session, storeUID in
            try retryable(key) { try change(client, mutation(session, storeUID, key), product, n) }
        } }
    }

    static let cart = Subcommand(
        name: "cart",
        abstract: "Shows or changes the cart at a store (by default the saved city's default store).",
        discussion: """
        Without a subcommand, shows the cart with line totals and the subtotal. Looking changes nothing: a price \
        changed since the customer accepted it stays marked, and checkout refuses it, until cart --accept-prices \
        accepts it (a new cart version). The session is opened on first use and saved beside the city, so carts \
        continue across runs. A change that got no answer (exit 68) may have been applied: its idempotency key is \
        printed, and the same command with --idempotency-key KEY retries it, applied at most once.
        """,
        options: [OptionSpec(name: "--accept-prices", help: "accept the changed prices the cart shows")] + storeOptions,
        subcommands: [cartAdd, cartSet, cartRemove, cartClear],
        validate: { parsed throws(UsageError) in
            let store = try StoreChoice(parsed)
            let accept = parsed.flags.contains("--accept-prices")
            return { ctx in try withCart(ctx, store, acceptedPrices: accept) { client, session, storeUID in
                try client.cart(session: session, storeUID: storeUID, acceptPrices: accept)
            } }
        })

    static let cartAdd = Subcommand(
        name: "add",
        abstract: "Adds one (or --qty N) of a product to the cart.",
        options: [OptionSpec(name: "--qty", valueName: "N", help: "how many to add", defaultValue: "1"), idempotencyKeyOption] + storeOptions,
        arguments: [ArgumentSpec("PRODUCT", "the product's uid")],
        exitCodes: [ExitCodeSpec(73, "out of stock, or the line would exceed the most one line holds (FAILED_PRECONDITION)")],
        validate: { parsed throws(UsageError) in
            try lineChange(parsed, quantity: parsed.values["--qty"] ?? "1") { try $0.addItem($1, productUID: $2, quantity: $3) }
        })

    static let cartSet = Subcommand(
        name: "set",
        abstract: "Sets a line's quantity; 0 removes the line.",
        options: [idempotencyKeyOption] + storeOptions,
        arguments: [ArgumentSpec("PRODUCT", "the product's uid"), ArgumentSpec("N", "the quantity")],
        validate: { parsed throws(UsageError) in
            try lineChange(parsed, quantity: parsed.positionals[1]) { try $0.setQuantity($1, productUID: $2, quantity: $3) }
        })

    static let cartRemove = Subcommand(
        name: "remove",
        abstract: "Removes a line from the cart, asking first on a terminal.",
        options: [OptionSpec(name: "--yes", help: "remove without asking"), idempotencyKeyOption] + storeOptions,
        arguments: [ArgumentSpec("PRODUCT", "the product's uid")],
        exitCodes: [ExitCodeSpec(130, "the question was answered no; nothing was changed")],
        validate: { parsed throws(UsageError) in
            let store = try StoreChoice(parsed)
            let product = parsed.positionals[0]
            let yes = parsed.flags.contains("--yes")
            let key = parsed.values["--idempotency-key"] ?? newKey()
            if !yes && !Terminal.inputIsTerminal {
                throw UsageError("cart remove asks for confirmation, and there is no terminal to ask on; add --yes")
            }
            return { ctx in try withCart(ctx, store) { client, session, storeUID in
                if !yes {
                    let current = try client.cart(session: session, storeUID: storeUID)
                    guard let line = current.lines.first(where: { $0.productUID == product }) else {
                        throw GroserError.server(Status(.notFound, "The product \"\(product)\" is not in the cart."))
                    }
                    guard Terminal.confirm(TerminalText("Remove \(line.name) from the cart?").text) else {
                        throw Cancelled()
                    }
                }
                return try retryable(key) { try client.removeItem(mutation(session, storeUID, key), productUID: product) }
            } }
        })

    static let cartClear = Subcommand(
        name: "clear",
        abstract: "Empties the cart.",
        options: [idempotencyKeyOption] + storeOptions,
        validate: { parsed throws(UsageError) in
            let store = try StoreChoice(parsed)
            let key = parsed.values["--idempotency-key"] ?? newKey()
            return { ctx in try withCart(ctx, store) { client, session, storeUID in
                try retryable(key) { try client.clearCart(mutation(session, storeUID, key)) }
            } }
        })

    static let checkout = Subcommand(
        name: "checkout",
        abstract: "Pays for the cart by card and places the order.",
        discussion: """
        The card number and then the CVC are read from a prompt with echo off, or with --card-from-stdin as the \
        first and second lines of standard input; never from an argument. The holder's name and the delivery \
        address come from --name and --address, or, when these are left out, from a prompt after the card's (or \
        with --card-from-stdin from the next lines of standard input: the name, then the address). Arguments are \
        visible to every user of the host in ps and /proc/PID/cmdline while checkout runs, so --name and --address \
        are for scripts whose holder and address are no secret; the card never is an argument. The order is for the cart as shown: the \
        version cart printed (--expect-version N), else the cart checkout shows before asking for the card; a cart \
        changed since is refused (exit 74). If prices changed since they were accepted, checkout shows them and \
        stops before asking for the card (exit 74, ABORTED: the prices must be looked at and accepted with cart \
        --accept-prices, unlike out of stock, 73, where the cart must change first).
        """,
        options: [
            OptionSpec(name: "--exp", valueName: "MM/YY", help: "the card's expiry month and year (MM/YY or MM/YYYY)", isRequired: true),
            OptionSpec(name: "--name", valueName: "HOLDER", help: "the name on the card (shown by ps to every user; else asked, or read from stdin)"),
            OptionSpec(name: "--address", valueName: "ADDRESS", help: "where to deliver (shown by ps to every user; else asked, or read from stdin)"),
            OptionSpec(name: "--card-from-stdin", help: "read the number and CVC from standard input, then the name and the address when not given as options"),
            OptionSpec(name: "--expect-version", valueName: "N", help: "the cart version the customer confirmed (as cart printed it)"),
            idempotencyKeyOption,
        ] + storeOptions,
        exitCodes: [
            ExitCodeSpec(73, "a product is out of stock or no longer sold, or the cart is empty (FAILED_PRECONDITION)"),
            ExitCodeSpec(74, "prices changed since they were accepted (cart --accept-prices accepts them), or the cart is not at the expected version (ABORTED)"),
            ExitCodeSpec(130, "the card prompt was cancelled (Ctrl-C or Ctrl-D); nothing was paid"),
        ],
        validate: { parsed throws(UsageError) in
            let store = try StoreChoice(parsed)
            let exp = parsed.values["--exp"]!, holderOption = parsed.values["--name"], addressOption = parsed.values["--address"]
            let parts = exp.split(separator: "/")
            guard parts.count == 2, let month = UInt32(parts[0]), let year = UInt32(parts[1]),
                  parts[0].count <= 2, parts[1].count == 2 || parts[1].count == 4 else {
                throw UsageError("--exp must look like MM/YY or MM/YYYY, not \"\(exp)\"")
            }
            var expected: UInt64?
            if let text = parsed.values["--expect-version"] {
                guard let n = UInt64(text), n > 0 else { throw UsageError("--expect-version must be a cart version (1 or more), not \"\(text)\"") }
                expected = n
            }
            let fromStdin = parsed.flags.contains("--card-from-stdin")
            let key = parsed.values["--idempotency-key"] ?? newKey()
            if !fromStdin && !Terminal.inputIsTerminal {
                throw UsageError("no terminal to read the card from; pipe the number and CVC (and the name and address) with --card-from-stdin")
            }
            return { ctx in
                try withSession(ctx, store) { client, session, storeUID in
                    let cart = try client.cart(session: session, storeUID: storeUID)
                    let changed = cart.lines.filter(\.priceChanged)
                    if !changed.isEmpty {
                        // ABORTED, not FAILED_PRECONDITION: nothing in the
                        // cart needs to change, only the buyer's consent to
                        // the prices (cart --accept-prices), as for a stale version.
                        let list = changed.map { "\($0.name) \($0.previousPrice.map(HumanOutput.price) ?? "?") → \(HumanOutput.price($0.unitPrice))" }
                        throw GroserError.server(Status(.aborted,
                            "Prices changed since they were accepted: \(list.joined(separator: "; ")). "
                            + "Run 'groser-client cart --accept-prices' to accept them, then check out again."))
                    }
                    if let expected, expected != cart.version {
                        throw GroserError.server(Status(.aborted,
                            "The cart is at version \(cart.version), not \(expected); show it again with 'groser-client cart' and confirm it."))
                    }
                    let number: String?, cvc: String?, holder: String?, address: String?
                    if fromStdin {
                        number = Terminal.readLine()
                        cvc = Terminal.readLine()
                        guard number != nil, cvc != nil else { throw UsageError("the card number and CVC were not given") }
                        holder = holderOption ?? Terminal.readLine()
                        guard holder?.isEmpty == false else {
                            throw UsageError("the holder's name was not given: --name, or the line after the CVC")
                        }
                        address = addressOption ?? Terminal.readLine()
                        guard address?.isEmpty == false else {
                            throw UsageError("the delivery address was not given: --address, or the line after the name")
                        }
                    } else {
                        StandardStreams.err(TerminalText("Paying \(HumanOutput.price(cart.subtotal)) for \(cart.itemCount) items at \(storeUID).\n").text)
                        number = Terminal.readSecret(prompt: "Card number: ")
                        cvc = number == nil ? nil : Terminal.readSecret(prompt: "CVC: ")
                        holder = cvc == nil ? nil : holderOption ?? ask("Name on the card: ")
                        address = holder == nil ? nil : addressOption ?? ask("Delivery address: ")
                    }
                    guard let number, let cvc, let holder, let address else { throw Cancelled() }
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
        name: "orders",
        abstract: "Lists this session's orders, newest first.",
        options: [ListFormat.option],
        validate: { parsed throws(UsageError) in
            let format = ListFormat(parsed)
            return { ctx in
                let client = ctx.client()
                guard let session = try ctx.savedSession(of: client) else {
                    ctx.printList(.listOrders([]), path: ["orders"], format: format, human: "No orders yet.\n")
                    return
                }
                let orders = try client.orders(session: session)
                ctx.printList(.listOrders(orders), path: ["orders"], format: format,
                              human: orders.isEmpty ? "No orders yet.\n"
                                                    : TerminalText.joined(orders.map(HumanOutput.order), separator: "\n"))
            }
        })

    static let adminCodes = [
        ExitCodeSpec(71, "this user may not change the catalog (PERMISSION_DENIED): only groserd's own user, root and members of groserd's --admin-group may"),
    ]

    static let admin = Subcommand(
        name: "admin",
        abstract: "Operators' commands: change a product, import or export the catalog.",
        discussion: """
        Only groserd's own user, root and members of the group groserd was started with as --admin-group may \
        run them; others get PERMISSION_DENIED (exit 71).
        """,
        subcommands: [adminSetProduct, adminImport, adminExport],
        exitCodes: adminCodes)

    static let adminSetProduct = Subcommand(
        name: "set-product",
        abstract: "Changes a product's price and/or stock.",
        options: [
            OptionSpec(name: "--price", valueName: "AMOUNT", help: "the new price in the currency's units, e.g. 89.90"),
            OptionSpec(name: "--stock", valueName: "N", help: "the new stock count"),
        ],
        arguments: [ArgumentSpec("PRODUCT", "the product's uid")],
        validate: { parsed throws(UsageError) in
            let product = parsed.positionals[0]
            var price: Int64?
            if let text = parsed.values["--price"] {
                guard let minor = parseAmount(text) else {
                    throw UsageError("--price must be an amount like 89.90, not \"\(text)\"")
                }
                price = minor
            }
            var stock: UInt32?
            if let text = parsed.values["--stock"] {
                guard let n = UInt32(text) else { throw UsageError("--stock must be a whole number, not \"\(text)\"") }
                stock = n
            }
            guard price != nil || stock != nil else { throw UsageError("give --price, --stock or both") }
            return { ctx in
                let r = try ctx.client().setProduct(ProductUpdate(productUID: product, priceMinorUnits: price, stock: stock))
                ctx.print(.setProduct(r),
                          human: "\(r.product.name): \(HumanOutput.price(r.product.price)), stock \(r.stock) · catalog version \(r.catalogVersion)\n")
            }
        })

    static let adminImport = Subcommand(
        name: "import",
        abstract: "Streams a catalog file (docs/CATALOG.md) into groserd, all or nothing.",
        discussion: "Every line is checked before anything is sent; a refused file changes nothing.",
        options: [OptionSpec(name: "--replace", help: "also remove what the file does not name in the stores it covers")],
        arguments: [ArgumentSpec("FILE", "the catalog file", takesFile: true)],
        exitCodes: [ExitCodeSpec(67, "the file was refused (INVALID_ARGUMENT); every bad line is named and nothing was imported")],
        validate: { parsed throws(UsageError) in
            let path = parsed.positionals[0]
            let replace = parsed.flags.contains("--replace")
            return { ctx in try CatalogTransfer.importFile(path, replace: replace, ctx) }
        })

    static let adminExport = Subcommand(
        name: "export",
        abstract: "Writes the catalog (or one store) in the catalog file format.",
        options: [
            OptionSpec(name: "--store", valueName: "UID", help: "only this store (and its city)"),
            OptionSpec(name: "--output", valueName: "FILE", help: "write to FILE instead of standard output", takesFile: true),
        ],
        validate: { parsed throws(UsageError) in
            let store = parsed.values["--store"] ?? ""
            let output = parsed.values["--output"]
            return { ctx in try CatalogTransfer.export(store: store, output: output, ctx) }
        })
}

/// Which store a cart command means.
struct StoreChoice: Sendable {
    var city: String?
    var store: String?

    init(_ parsed: ParsedArguments) throws(UsageError) {
        (city, store) = try Commands.storeChoice(parsed)
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

/// Prints `prompt` on standard error and reads a line, echoed as typed;
/// nil at end of input (Ctrl-D).
func ask(_ prompt: String) -> String? {
    StandardStreams.err(prompt)
    return Terminal.readLine()
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

/// `withSession` for commands that print the resulting cart;
/// `acceptedPrices` when the cart is the answer to accepting its prices.
func withCart(_ ctx: Context, _ choice: StoreChoice, acceptedPrices: Bool = false,
              _ body: @escaping (GroserClient, String, String) throws -> Cart) throws {
    try withSession(ctx, choice) { client, session, storeUID in
        let cart = try body(client, session, storeUID)
        ctx.print(.cart(cart), human: HumanOutput.cart(cart, acceptedPrices: acceptedPrices))
    }
}
