import GroserClient
import GroserCommandLine
import GroserSystem

// groser-client's watch and stats commands, and their output.

extension Commands {
    static let watch = Subcommand(
        name: "watch",
        abstract: "Prints one line per change of a store's catalog as it happens, until interrupted.",
        discussion: """
        With --json, one JSON object per line. Reconnects by itself and resumes from the last version it printed. \
        Without --city or --store, the city saved by set-city is used. Ctrl-C ends it with exit 130.
        """,
        options: storeSelection + [
            OptionSpec(name: "--since", valueName: "VERSION", help: "the store version held: changes since are printed first"),
            OptionSpec(name: "--count", valueName: "N", help: "stop after N lines (the first, initial one included)"),
        ],
        validate: { parsed throws(UsageError) in
            let (city, store) = try storeChoice(parsed)
            var since: UInt64 = 0
            if let s = parsed.values["--since"] {
                guard let v = UInt64(s) else { throw UsageError("--since must be a store version (a whole number), not \"\(s)\"") }
                since = v
            }
            var count: Int?
            if let c = parsed.values["--count"] {
                guard let v = Int(c), v > 0 else { throw UsageError("--count must be a whole number above 0, not \"\(c)\"") }
                count = v
            }
            return { ctx in
                let selector: StoreSelector
                if let city { selector = .cityCode(city) }
                else if let store { selector = .storeUID(store) }
                else {
                    guard let code = try ClientSettings.load(from: ctx.settingsPath).cityCode else {
                        throw UsageError("no city given and none saved; use --city CODE or first groser-client set-city CODE")
                    }
                    selector = .cityCode(code)
                }
                var printed = 0
                try ctx.client().watch(selector, sinceVersion: since) { event in
                    if ctx.options.json {
                        ctx.out(ProtoJSON.json(.watch(event), emitDefaults: ctx.options.emitDefaults).compact() + "\n")
                    } else {
                        ctx.out(HumanOutput.watchEvent(event).text)
                    }
                    printed += 1
                    return !ctx.outputFailed && (count.map { printed < $0 } ?? true)
                }
            }
        })

    static let stats = Subcommand(
        name: "stats",
        abstract: "Shows groserd's counters, request counts and latency percentiles, as Redis INFO does.",
        discussion: """
        Per-method request counts and latency percentiles, errors by status, customer batches made durable and \
        their latency (fsync: the customer log's append, or with PostgreSQL the batch's transaction), the store \
        (sqlite or postgresql), its state (ok, or unavailable since when and why), and with PostgreSQL its round \
        trips, conflicts and reconnects, catalog size and memory. --prometheus prints the Prometheus text format \
        (for node_exporter's textfile collector).
        """,
        options: [OptionSpec(name: "--prometheus", valueName: nil, help: "print the Prometheus text exposition format")],
        validate: { parsed throws(UsageError) in
            let prometheus = parsed.flags.contains("--prometheus")
            return { ctx in
                let s = try ctx.client().stats()
                if prometheus {
                    ctx.out(StatsOutput.prometheus(s))
                } else {
                    ctx.print(.stats(s), human: StatsOutput.info(s))
                }
            }
        })
}

extension HumanOutput {
    /// One line per watch frame.
    static func watchEvent(_ e: WatchEvent) -> TerminalText {
        if e.initial {
            var line: TerminalText = "\(e.storeUID) at version \(e.storeVersion)"
            if e.reload { line += ": the changes since \(e.previousVersion) are not known; reload the store" }
            else if !e.products.isEmpty { line += " (since \(e.previousVersion)): " + products(e.products) }
            return line + "\n"
        }
        if e.reload { return "\(e.storeUID) version \(e.storeVersion) (after \(e.previousVersion)): reload the store\n" }
        let shelves = e.shelfUIDs.count == 1 ? "1 shelf" : "\(e.shelfUIDs.count) shelves"
        return "\(e.storeUID) version \(e.storeVersion) (after \(e.previousVersion)), \(shelves): " + products(e.products) + "\n"
    }

    private static func products(_ list: [ProductChange]) -> TerminalText {
        TerminalText.joined(list.map { p in
            "\(p.uid) \(price(p.price))" + (p.outOfStock ? " out of stock" : "")
        }, separator: ", ")
    }
}

/// Stats for people (Redis INFO's layout: `# Section`, then `key:value`)
/// and for Prometheus.
enum StatsOutput {
    static func info(_ s: ServerStats) -> TerminalText {
        var t: TerminalText = "# Server\nserver_version:\(s.serverVersion)\nuptime_in_seconds:\(s.uptimeMilliseconds / 1000)\n"
        t += "\n# Clients\nconnected_clients:\(s.connections)\ntotal_connections_received:\(s.connectionsAccepted)\n"
        t += "rejected_connections:\(s.connectionsRefused)\nrejected_connections_per_uid:\(s.connectionsRefusedPerUID)\n"
        t += "rejected_connections_reserved:\(s.connectionsRefusedReserved)\nidle_connections_closed:\(s.connectionsClosedIdle)\n"
        t += "slow_readers_cut_off:\(s.slowReadersCutOff)\n"
        t += "\n# Watch\nwatchers:\(s.watchers)\nwatch_frames:\(s.watchFrames)\nwatch_coalesced:\(s.watchCoalesced)\n"
        t += "watchers_cut_off:\(s.watchersCutOff)\n"
        t += "\n# Catalog\ncatalog_version:\(s.catalogVersion)\ncatalog_stores:\(s.catalogStores)\ncatalog_products:\(s.catalogProducts)\n"
        t += "\n# Persistence\ncommit_batches:\(s.commitBatches)\n"
        t += "fsync_usec:p50=\(s.fsync.p50),p90=\(s.fsync.p90),p99=\(s.fsync.p99),p999=\(s.fsync.p999),max=\(s.fsync.max)\n"
        t += "\n# Store\nstore:\(s.store)\nstore_state:\(s.storeState)\n"
        if s.store == "postgresql" {
            let r = s.storeRoundTrip
            t += "store_round_trips:\(r.count)\n"
            t += "store_round_trip_usec:p50=\(r.p50),p90=\(r.p90),p99=\(r.p99),p999=\(r.p999),max=\(r.max)\n"
            t += "store_conflicts:\(s.storeConflicts)\nstore_reconnects:\(s.storeReconnects)\n"
        }
        t += "\n# Memory\nused_memory_rss:\(s.residentBytes)\nused_memory_rss_human:\(megabytes(s.residentBytes))\n"
            + "search_index_bytes:\(s.searchIndexBytes)\nsearch_index_human:\(megabytes(s.searchIndexBytes))\n"
        t += "\n# Commandstats\n"
        for m in s.methods {
            t += "cmdstat_\(m.method):calls=\(m.requests),errors=\(m.errors),usec=\(m.latency.sum),"
            t += "p50_usec=\(m.latency.p50),p99_usec=\(m.latency.p99),p999_usec=\(m.latency.p999),max_usec=\(m.latency.max)\n"
        }
        t += "\n# Errorstats\n"
        for e in s.errors { t += "errorstat_\(e.code.description):count=\(e.count)\n" }
        return t
    }

    private static func megabytes(_ bytes: UInt64) -> String {
        let tenths = bytes * 10 / (1024 * 1024)
        return "\(tenths / 10).\(tenths % 10)M"
    }

    /// The Prometheus text exposition format (version 0.0.4).
    static func prometheus(_ s: ServerStats) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP groserd_\(name) \(help)\n# TYPE groserd_\(name) \(type)\n"
            for sample in samples { out += "groserd_\(name)\(sample.labels) \(sample.value)\n" }
        }
        func seconds(_ microseconds: UInt64) -> String {
            let whole = microseconds / 1_000_000
            let fraction = String(microseconds % 1_000_000)
            return "\(whole).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)"
        }
        func summary(_ name: String, _ help: String, _ rows: [(labels: [String], latency: LatencySummary)]) {
            out += "# HELP groserd_\(name) \(help)\n# TYPE groserd_\(name) summary\n"
            for row in rows {
                for (q, v) in [("0.5", row.latency.p50), ("0.9", row.latency.p90), ("0.99", row.latency.p99), ("0.999", row.latency.p999)] {
                    out += "groserd_\(name){\((row.labels + ["quantile=\"\(q)\""]).joined(separator: ","))} \(seconds(v))\n"
                }
                let labels = row.labels.isEmpty ? "" : "{\(row.labels.joined(separator: ","))}"
                out += "groserd_\(name)_sum\(labels) \(seconds(row.latency.sum))\n"
                out += "groserd_\(name)_count\(labels) \(row.latency.count)\n"
            }
        }
        metric("info", "gauge", "groserd's version.", [("{version=\"\(label(s.serverVersion))\"}", "1")])
        metric("uptime_seconds", "gauge", "Seconds since groserd started.", [("", seconds(s.uptimeMilliseconds * 1000))])
        metric("connections", "gauge", "Client connections open now.", [("", "\(s.connections)")])
        metric("connections_accepted_total", "counter", "Client connections accepted since start.", [("", "\(s.connectionsAccepted)")])
        metric("connections_refused_total", "counter", "Connections refused, for any cause.", [("", "\(s.connectionsRefused)")])
        metric("connections_refused_per_uid_total", "counter", "Connections refused because their peer's uid held --max-connections-per-uid.",
               [("", "\(s.connectionsRefusedPerUID)")])
        metric("connections_refused_reserved_total", "counter", "Connections refused because only the slots kept for operators were left.",
               [("", "\(s.connectionsRefusedReserved)")])
        metric("connections_closed_idle_total", "counter", "Connections closed after --idle-timeout with nothing owed and no watch.",
               [("", "\(s.connectionsClosedIdle)")])
        metric("slow_readers_cut_off_total", "counter", "Connections closed for not reading their answers.", [("", "\(s.slowReadersCutOff)")])
        metric("watchers", "gauge", "Watches open now.", [("", "\(s.watchers)")])
        metric("watch_frames_total", "counter", "Watch frames sent.", [("", "\(s.watchFrames)")])
        metric("watch_coalesced_total", "counter", "Catalog changes merged into a later watch frame.", [("", "\(s.watchCoalesced)")])
        metric("watchers_cut_off_total", "counter", "Watching connections closed as slow readers.", [("", "\(s.watchersCutOff)")])
        metric("requests_total", "counter", "Requests answered, by method.",
               s.methods.map { ("{method=\"\(label($0.method))\"}", "\($0.requests)") })
        metric("request_errors_total", "counter", "Requests answered with a status other than OK, by method.",
               s.methods.map { ("{method=\"\(label($0.method))\"}", "\($0.errors)") })
        metric("responses_by_status_total", "counter", "Answers with a status other than OK, by status code.",
               s.errors.map { ("{code=\"\($0.code.description)\"}", "\($0.count)") })
        summary("request_duration_seconds", "From reading a request to its answer being queued for the socket.",
                s.methods.map { (["method=\"\(label($0.method))\""], $0.latency) })
        metric("catalog_version", "gauge", "The catalog's version.", [("", "\(s.catalogVersion)")])
        metric("catalog_stores", "gauge", "Stores in the catalog.", [("", "\(s.catalogStores)")])
        metric("catalog_products", "gauge", "Products in the catalog.", [("", "\(s.catalogProducts)")])
        metric("commit_batches_total", "counter", "Customer batches made durable.", [("", "\(s.commitBatches)")])
        summary("fsync_duration_seconds",
                "Customer batches: the log's write and fdatasync, or with PostgreSQL the batch's transaction (BEGIN to COMMIT).",
                [([], s.fsync)])
        metric("store_up", "gauge", "1 when the store's last round trip succeeded, 0 while it is unavailable.",
               [("{store=\"\(label(s.store))\"}", s.storeState == "ok" ? "1" : "0")])
        if s.store == "postgresql" {
            summary("store_round_trip_seconds", "PostgreSQL round trips that wait for no commit.", [([], s.storeRoundTrip)])
            metric("store_conflicts_total", "counter", "Batches run again after another groserd changed one of their sessions first.",
                   [("", "\(s.storeConflicts)")])
            metric("store_reconnects_total", "counter", "Connections to PostgreSQL made again after one was lost or could not be made.",
                   [("", "\(s.storeReconnects)")])
        }
        metric("resident_memory_bytes", "gauge", "Resident memory (VmRSS).", [("", "\(s.residentBytes)")])
        metric("search_index_bytes", "gauge", "Memory of the stores' search indexes (part of the resident memory).", [("", "\(s.searchIndexBytes)")])
        return out
    }

    /// A label value as the text format needs it: backslash, quote and line feed escaped.
    private static func label(_ s: String) -> String {
        s.escaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n"])
    }
}
