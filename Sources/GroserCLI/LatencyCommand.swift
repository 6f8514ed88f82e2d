import GroserClient
import GroserCommandLine
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

// groser-client latency: round trips to groserd measured, like
// redis-cli --latency.

extension Commands {
    static let latency = Subcommand(
        name: "latency",
        abstract: "Measures round trips to groserd with ServerInfo calls, as redis-cli --latency does.",
        discussion: """
        Calls ServerInfo one call after another and prints the least, average and most milliseconds a round trip \
        took: on a terminal updated in place, in a pipe once at the end. Runs until Ctrl-C (the summary is printed, \
        then exit 130) or --count calls (exit 0). Also spelled groser-client --latency.
        """,
        options: [
            OptionSpec(name: "--count", valueName: "N", help: "stop after N calls"),
            OptionSpec(name: "--interval", valueName: "MS", help: "pause between calls, in milliseconds", defaultValue: "10"),
        ],
        validate: { parsed throws(UsageError) in
            var count: Int?
            if let c = parsed.values["--count"] {
                guard let v = Int(c), v > 0 else { throw UsageError("--count must be a whole number above 0, not \"\(c)\"") }
                count = v
            }
            var interval = 10
            if let i = parsed.values["--interval"] {
                guard let v = Int(i), v >= 0, v <= 60_000 else { throw UsageError("--interval must be 0 to 60000 ms, not \"\(i)\"") }
                interval = v
            }
            return { ctx in try measureLatency(ctx, count: count, intervalMilliseconds: interval) }
        })

    private static func measureLatency(_ ctx: Context, count: Int?, intervalMilliseconds: Int) throws {
        let client = ctx.client()
        let live = ProcessInfo.isTerminal(1) && !ctx.options.json
        var samples = 0
        var least = UInt64.max, most: UInt64 = 0, total: UInt64 = 0
        var lastDrawn: UInt64 = 0
        func summary() -> String {
            func ms(_ ns: UInt64) -> String {
                let micros = (ns + 500) / 1000
                let fraction = String(micros % 1000)
                return "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
            }
            let average = samples == 0 ? 0 : total / UInt64(samples)
            if ctx.options.json {
                return JSON.object([("samples", .number(String(samples))), ("minMs", .number(ms(samples == 0 ? 0 : least))),
                                    ("avgMs", .number(ms(average))), ("maxMs", .number(ms(most)))]).compact()
            }
            return "min: \(ms(samples == 0 ? 0 : least)) ms, avg: \(ms(average)) ms, max: \(ms(most)) ms (\(samples) samples)"
        }
        try Interrupts.deferring { () throws(GroserError) in
            while !Interrupts.happened && !ctx.outputFailed && count.map({ samples < $0 }) ?? true {
                let started = monotonicNanoseconds()
                _ = try client.serverInfo()
                let took = monotonicNanoseconds() - started
                samples += 1
                total += took
                least = min(least, took)
                most = max(most, took)
                if live && (monotonicNanoseconds() - lastDrawn > 100_000_000) {
                    lastDrawn = monotonicNanoseconds()
                    ctx.out("\r\u{1B}[K" + summary())
                }
                if intervalMilliseconds > 0 && count.map({ samples < $0 }) ?? true { usleep(UInt32(intervalMilliseconds) * 1000) }
            }
        }
        ctx.out((live ? "\r\u{1B}[K" : "") + summary() + "\n")
        if Interrupts.happened { throw Interrupted() }
    }
}
