import GroserSystem

/// groser-bench as a function of its arguments, so `main` stays thin.
public enum BenchCommand {
    /// Runs the command line and returns the exit code: 0 when every request
    /// succeeded, 1 when any failed or the run could not start, 2 on a usage error.
    public static func run(_ arguments: [String]) -> Int32 {
        let options: BenchOptions
        do {
            switch try BenchOptions.parse(arguments) {
            case .help:
                StandardStreams.out(BenchOptions.usage + "\n")
                return 0
            case .version:
                StandardStreams.out("groser-bench \(GroserRelease.version)\n")
                return 0
            case .run(let parsed):
                options = parsed
            }
        } catch {
            StandardStreams.err("groser-bench: \(error)\n")
            return 2
        }
        if BuildMode.isDebug { StandardStreams.err(BuildMode.debugWarning + "\n") }

        let showProgress = ProcessInfo.isTerminal(2)
        do {
            if options.warmupSeconds > 0 {
                var warmup = options
                warmup.length = .seconds(options.warmupSeconds)
                _ = try LoadGenerator.run(warmup, progress: showProgress ? progressPrinter(label: "warm-up") : nil)
            }
            let result = try LoadGenerator.run(options, progress: showProgress ? progressPrinter(label: "") : nil)
            if showProgress { StandardStreams.err("\r\u{1B}[K") }
            let report = BenchReport(result)
            StandardStreams.out(options.json ? report.json : report.text)
            return result.tally.hasErrors || result.tally.succeeded == 0 ? 1 : 0
        } catch {
            if showProgress { StandardStreams.err("\r\u{1B}[K") }
            StandardStreams.err("groser-bench: \(error)\n")
            return 1
        }
    }

    /// One line on stderr, rewritten in place: requests so far and the current rate.
    private static func progressPrinter(label: String) -> (UInt64, Double) -> Void {
        var last: (answered: UInt64, seconds: Double) = (0, 0)
        return { answered, seconds in
            let interval = seconds - last.seconds
            let rate = interval > 0 ? Double(answered - last.answered) / interval : 0
            last = (answered, seconds)
            let prefix = label.isEmpty ? "" : label + ": "
            StandardStreams.err("\r\u{1B}[K\(prefix)\(answered) requests in \(BenchReport.format(seconds, 1)) s, \(BenchReport.format(rate, 0)) rps")
        }
    }
}
