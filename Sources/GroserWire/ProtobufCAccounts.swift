import CGroserProto
import CProtobufC

// protobuf-c conversion of the account messages. Like ProtobufC.swift, no C
// pointer leaves this file's functions.

extension Arena {
    func account(_ v: Account) -> UnsafeMutablePointer<Groser__V1__Account> {
        message(Groser__V1__Account.self) { p in
            groser__v1__account__init(p)
            p.pointee.email = string(v.email)
            p.pointee.name = string(v.name)
            p.pointee.created_at_unix = v.createdAtUnix
        }
    }

    func mergedLine(_ v: MergedLine) -> UnsafeMutablePointer<Groser__V1__MergedLine> {
        message(Groser__V1__MergedLine.self) { p in
            groser__v1__merged_line__init(p)
            p.pointee.product_uid = string(v.productUID)
            p.pointee.guest_quantity = v.guestQuantity
            p.pointee.quantity = v.quantity
            p.pointee.summed = v.summed ? 1 : 0
            p.pointee.dropped_units = v.droppedUnits
            p.pointee.not_added = v.notAdded ? 1 : 0
        }
    }

    func mergedCart(_ v: MergedCart) -> UnsafeMutablePointer<Groser__V1__MergedCart> {
        message(Groser__V1__MergedCart.self) { p in
            groser__v1__merged_cart__init(p)
            p.pointee.store_uid = string(v.storeUID)
            p.pointee.n_lines = v.lines.count
            p.pointee.lines = array(v.lines.map(mergedLine))
            p.pointee.version = v.version
        }
    }

    /// Fills the request's method for the account methods; false for others.
    func accountMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        switch method {
        case .register(let r):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_REGISTER
            p.pointee.register_ = message(Groser__V1__RegisterRequest.self) { g in
                groser__v1__register_request__init(g)
                g.pointee.email = string(r.email)
                g.pointee.password = string(r.password)
                g.pointee.name = string(r.name)
            }
        case .login(let d):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LOGIN
            p.pointee.login = message(Groser__V1__LoginRequest.self) { g in
                groser__v1__login_request__init(g)
                g.pointee.email = string(d.email)
                g.pointee.password = string(d.password)
                g.pointee.session = string(d.guestSession)
                g.pointee.idempotency_key = string(d.idempotencyKey)
            }
        case .logout(let session):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_LOGOUT
            p.pointee.logout = message(Groser__V1__LogoutRequest.self) { g in
                groser__v1__logout_request__init(g)
                g.pointee.session = string(session)
            }
        case .whoAmI(let session):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_WHO_AM_I
            p.pointee.who_am_i = message(Groser__V1__WhoAmIRequest.self) { g in
                groser__v1__who_am_irequest__init(g)
                g.pointee.session = string(session)
            }
        default:
            return false
        }
        return true
    }
}

/// The account method of an unpacked request, or nil for another method.
func decodeAccountMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    switch c.method_case {
    case GROSER__V1__REQUEST__METHOD_REGISTER:
        let g = c.register_.pointee
        return .register(Registration(email: str(g.email), password: str(g.password), name: str(g.name)))
    case GROSER__V1__REQUEST__METHOD_LOGIN:
        let g = c.login.pointee
        return .login(LoginDetails(email: str(g.email), password: str(g.password), guestSession: str(g.session),
                                   idempotencyKey: str(g.idempotency_key)))
    case GROSER__V1__REQUEST__METHOD_LOGOUT:
        return .logout(session: str(c.logout.pointee.session))
    case GROSER__V1__REQUEST__METHOD_WHO_AM_I:
        return .whoAmI(session: str(c.who_am_i.pointee.session))
    default:
        return nil
    }
}

private func account(_ p: UnsafeMutablePointer<Groser__V1__Account>?) -> Account? {
    guard let c = p?.pointee else { return nil }
    return Account(email: str(c.email), name: str(c.name), createdAtUnix: c.created_at_unix)
}

private func mergedLine(_ p: UnsafeMutablePointer<Groser__V1__MergedLine>) -> MergedLine {
    let c = p.pointee
    return MergedLine(productUID: str(c.product_uid), guestQuantity: c.guest_quantity, quantity: c.quantity,
                      summed: c.summed != 0, droppedUnits: c.dropped_units, notAdded: c.not_added != 0)
}

private func loginResult(_ c: Groser__V1__LoginResponse) -> LoginResult {
    LoginResult(session: str(c.session), account: account(c.account) ?? Account(email: "", name: "", createdAtUnix: 0),
                merged: items(c.merged, c.n_merged).map { m in
                    MergedCart(storeUID: str(m.pointee.store_uid), lines: items(m.pointee.lines, m.pointee.n_lines).map(mergedLine),
                               version: m.pointee.version)
                },
                quantityMaximum: c.quantity_maximum, cartLineMaximum: c.cart_line_maximum)
}

/// The account body of an unpacked response, or nil for another body.
func decodeAccountBody(_ c: Groser__V1__Response) -> ResponseBody? {
    switch c.body_case {
    case GROSER__V1__RESPONSE__BODY_REGISTER:
        return .register(account(c.register_.pointee.account) ?? Account(email: "", name: "", createdAtUnix: 0))
    case GROSER__V1__RESPONSE__BODY_LOGIN:
        return .login(loginResult(c.login.pointee))
    case GROSER__V1__RESPONSE__BODY_LOGOUT:
        return .logout
    case GROSER__V1__RESPONSE__BODY_WHO_AM_I:
        let b = c.who_am_i.pointee
        return .whoAmI(Identity(account: account(b.account), sessionCreatedAtUnix: b.session_created_at_unix))
    default:
        return nil
    }
}

extension BodyEncoder {
    public static func register(_ v: Account) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__RegisterResponse.self) { p in
                groser__v1__register_response__init(p)
                p.pointee.account = arena.account(v)
            }
        }
    }

    public static func login(_ v: LoginResult) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__LoginResponse.self) { p in
                groser__v1__login_response__init(p)
                p.pointee.session = arena.string(v.session)
                p.pointee.account = arena.account(v.account)
                p.pointee.n_merged = v.merged.count
                p.pointee.merged = arena.array(v.merged.map(arena.mergedCart))
                p.pointee.quantity_maximum = v.quantityMaximum
                p.pointee.cart_line_maximum = v.cartLineMaximum
            }
        }
    }

    /// A LoginResponse body read back (a remembered login's answer); nil when
    /// the bytes are not one.
    public static func decodeLogin(_ body: [UInt8]) -> LoginResult? {
        body.withUnsafeBufferPointer { b in
            guard let p = groser__v1__login_response__unpack(nil, b.count, b.baseAddress) else { return nil }
            defer { groser__v1__login_response__free_unpacked(p, nil) }
            return loginResult(p.pointee)
        }
    }

    public static func logout() -> [UInt8] { [] }

    public static func whoAmI(_ v: Identity) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__WhoAmIResponse.self) { p in
                groser__v1__who_am_iresponse__init(p)
                if let a = v.account { p.pointee.account = arena.account(a) }
                p.pointee.session_created_at_unix = v.sessionCreatedAtUnix
            }
        }
    }
}
