import CGroserProto
import CProtobufC

// protobuf-c conversion of Watch, CancelWatch and Stats. Like ProtobufC.swift,
// no C pointer leaves this file's functions.

extension Arena {
    func productChange(_ v: ProductChange) -> UnsafeMutablePointer<Groser__V1__ProductChange> {
        message(Groser__V1__ProductChange.self) { p in
            groser__v1__product_change__init(p)
            p.pointee.uid = string(v.uid)
            p.pointee.shelf_uid = string(v.shelfUID)
            p.pointee.price = money(v.price)
            p.pointee.out_of_stock = v.outOfStock ? 1 : 0
        }
    }

    func latency(_ v: LatencySummary) -> UnsafeMutablePointer<Groser__V1__LatencySummary> {
        message(Groser__V1__LatencySummary.self) { p in
            groser__v1__latency_summary__init(p)
            p.pointee.count = v.count
            p.pointee.p50_us = v.p50
            p.pointee.p90_us = v.p90
            p.pointee.p99_us = v.p99
            p.pointee.p999_us = v.p999
            p.pointee.max_us = v.max
            p.pointee.sum_us = v.sum
        }
    }

    /// Fills the request's method for Watch, CancelWatch and Stats; false for others.
    func watchMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        switch method {
        case .watch(let selector, let since):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_WATCH
            p.pointee.watch = message(Groser__V1__WatchRequest.self) { g in
                groser__v1__watch_request__init(g)
                g.pointee.since_version = since
                switch selector {
                case .cityCode(let s)?:
                    g.pointee.selector_case = GROSER__V1__WATCH_REQUEST__SELECTOR_CITY_CODE
                    g.pointee.city_code = string(s)
                case .cityUID(let s)?:
                    g.pointee.selector_case = GROSER__V1__WATCH_REQUEST__SELECTOR_CITY_UID
                    g.pointee.city_uid = string(s)
                case .storeUID(let s)?:
                    g.pointee.selector_case = GROSER__V1__WATCH_REQUEST__SELECTOR_STORE_UID
                    g.pointee.store_uid = string(s)
                case nil:
                    break
                }
            }
        case .cancelWatch(let id):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_CANCEL_WATCH
            p.pointee.cancel_watch = message(Groser__V1__CancelWatchRequest.self) { g in
                groser__v1__cancel_watch_request__init(g)
                g.pointee.watch_id = id
            }
        case .stats:
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_STATS
            p.pointee.stats = message(Groser__V1__StatsRequest.self) { groser__v1__stats_request__init($0) }
        default:
            return false
        }
        return true
    }
}

/// Watch, CancelWatch or Stats of an unpacked request, or nil for another method.
func decodeWatchMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    switch c.method_case {
    case GROSER__V1__REQUEST__METHOD_WATCH:
        let g = c.watch.pointee
        let selector: StoreSelector?
        switch g.selector_case {
        case GROSER__V1__WATCH_REQUEST__SELECTOR_CITY_CODE: selector = .cityCode(str(g.city_code))
        case GROSER__V1__WATCH_REQUEST__SELECTOR_CITY_UID: selector = .cityUID(str(g.city_uid))
        case GROSER__V1__WATCH_REQUEST__SELECTOR_STORE_UID: selector = .storeUID(str(g.store_uid))
        default: selector = nil
        }
        return .watch(selector: selector, sinceVersion: g.since_version)
    case GROSER__V1__REQUEST__METHOD_CANCEL_WATCH:
        return .cancelWatch(watchID: c.cancel_watch.pointee.watch_id)
    case GROSER__V1__REQUEST__METHOD_STATS:
        return .stats
    default:
        return nil
    }
}

private func latency(_ p: UnsafeMutablePointer<Groser__V1__LatencySummary>?) -> LatencySummary {
    guard let c = p?.pointee else { return LatencySummary() }
    return LatencySummary(count: c.count, p50: c.p50_us, p90: c.p90_us, p99: c.p99_us, p999: c.p999_us,
                          max: c.max_us, sum: c.sum_us)
}

private func watchEvent(_ c: Groser__V1__WatchEvent) -> WatchEvent {
    var shelves: [String] = []
    if let s = c.shelf_uids { for i in 0..<c.n_shelf_uids { shelves.append(str(s[i])) } }
    return WatchEvent(
        storeUID: str(c.store_uid), storeVersion: c.store_version, previousVersion: c.previous_version,
        reload: c.reload != 0, shelfUIDs: shelves,
        products: items(c.products, c.n_products).map { p in
            ProductChange(uid: str(p.pointee.uid), shelfUID: str(p.pointee.shelf_uid), price: money(p.pointee.price),
                          outOfStock: p.pointee.out_of_stock != 0)
        },
        catalogVersion: c.catalog_version, initial: c.initial != 0)
}

private func stats(_ c: Groser__V1__StatsResponse) -> ServerStats {
    var s = ServerStats()
    s.serverVersion = str(c.server_version)
    s.uptimeMilliseconds = c.uptime_ms
    s.connections = c.connections
    s.connectionsAccepted = c.connections_accepted
    s.connectionsRefused = c.connections_refused
    s.watchers = c.watchers
    s.watchFrames = c.watch_frames
    s.watchCoalesced = c.watch_coalesced
    s.watchersCutOff = c.watchers_cut_off
    s.methods = items(c.methods, c.n_methods).map { m in
        MethodStats(method: str(m.pointee.method), requests: m.pointee.requests, errors: m.pointee.errors,
                    latency: latency(m.pointee.latency))
    }
    s.errors = items(c.errors, c.n_errors).map { e in
        StatusCount(code: StatusCode(rawValue: Int32(bitPattern: e.pointee.code)), count: e.pointee.count)
    }
    s.catalogVersion = c.catalog_version
    s.catalogStores = c.catalog_stores
    s.catalogProducts = c.catalog_products
    s.commitBatches = c.commit_batches
    s.fsync = latency(c.fsync)
    s.residentBytes = c.resident_bytes
    s.searchIndexBytes = c.search_index_bytes
    s.slowReadersCutOff = c.slow_readers_cut_off
    s.store = str(c.store)
    s.storeState = str(c.store_state)
    s.storeRoundTrip = latency(c.store_round_trip)
    s.storeConflicts = c.store_conflicts
    s.storeReconnects = c.store_reconnects
    s.connectionsRefusedPerUID = c.connections_refused_per_uid
    s.connectionsRefusedReserved = c.connections_refused_reserved
    s.connectionsClosedIdle = c.connections_closed_idle
    return s
}

/// The Watch, CancelWatch or Stats body of an unpacked response, or nil for another body.
func decodeWatchBody(_ c: Groser__V1__Response) -> ResponseBody? {
    switch c.body_case {
    case GROSER__V1__RESPONSE__BODY_WATCH: return .watch(watchEvent(c.watch.pointee))
    case GROSER__V1__RESPONSE__BODY_CANCEL_WATCH: return .cancelWatch
    case GROSER__V1__RESPONSE__BODY_STATS: return .stats(stats(c.stats.pointee))
    default: return nil
    }
}

extension BodyEncoder {
    /// A WatchEvent's encoding.
    public static func watchEvent(_ v: WatchEvent) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__WatchEvent.self) { p in
                groser__v1__watch_event__init(p)
                p.pointee.store_uid = arena.string(v.storeUID)
                p.pointee.store_version = v.storeVersion
                p.pointee.previous_version = v.previousVersion
                p.pointee.reload = v.reload ? 1 : 0
                p.pointee.n_shelf_uids = v.shelfUIDs.count
                if !v.shelfUIDs.isEmpty { p.pointee.shelf_uids = arena.array(v.shelfUIDs.map(arena.string)) }
                p.pointee.n_products = v.products.count
                if !v.products.isEmpty { p.pointee.products = arena.array(v.products.map(arena.productChange)) }
                p.pointee.catalog_version = v.catalogVersion
                p.pointee.initial = v.initial ? 1 : 0
            }
        }
    }

    public static func cancelWatch() -> [UInt8] { [] }

    public static func stats(_ v: ServerStats) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__StatsResponse.self) { p in
                groser__v1__stats_response__init(p)
                p.pointee.server_version = arena.string(v.serverVersion)
                p.pointee.uptime_ms = v.uptimeMilliseconds
                p.pointee.connections = v.connections
                p.pointee.connections_accepted = v.connectionsAccepted
                p.pointee.connections_refused = v.connectionsRefused
                p.pointee.watchers = v.watchers
                p.pointee.watch_frames = v.watchFrames
                p.pointee.watch_coalesced = v.watchCoalesced
                p.pointee.watchers_cut_off = v.watchersCutOff
                p.pointee.n_methods = v.methods.count
                if !v.methods.isEmpty {
                    p.pointee.methods = arena.array(v.methods.map { m in
                        arena.message(Groser__V1__MethodStats.self) { g in
                            groser__v1__method_stats__init(g)
                            g.pointee.method = arena.string(m.method)
                            g.pointee.requests = m.requests
                            g.pointee.errors = m.errors
                            g.pointee.latency = arena.latency(m.latency)
                        }
                    })
                }
                p.pointee.n_errors = v.errors.count
                if !v.errors.isEmpty {
                    p.pointee.errors = arena.array(v.errors.map { e in
                        arena.message(Groser__V1__StatusCount.self) { g in
                            groser__v1__status_count__init(g)
                            g.pointee.code = UInt32(bitPattern: e.code.rawValue)
                            g.pointee.count = e.count
                            g.pointee.name = arena.string(e.code.description)
                        }
                    })
                }
                p.pointee.catalog_version = v.catalogVersion
                p.pointee.catalog_stores = v.catalogStores
                p.pointee.catalog_products = v.catalogProducts
                p.pointee.commit_batches = v.commitBatches
                p.pointee.fsync = arena.latency(v.fsync)
                p.pointee.resident_bytes = v.residentBytes
                p.pointee.search_index_bytes = v.searchIndexBytes
                p.pointee.slow_readers_cut_off = v.slowReadersCutOff
                p.pointee.store = arena.string(v.store)
                p.pointee.store_state = arena.string(v.storeState)
                p.pointee.store_round_trip = arena.latency(v.storeRoundTrip)
                p.pointee.store_conflicts = v.storeConflicts
                p.pointee.store_reconnects = v.storeReconnects
                p.pointee.connections_refused_per_uid = v.connectionsRefusedPerUID
                p.pointee.connections_refused_reserved = v.connectionsRefusedReserved
                p.pointee.connections_closed_idle = v.connectionsClosedIdle
            }
        }
    }
}
