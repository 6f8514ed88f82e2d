import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM and SIGINT delivered through Dispatch sources, registered before
/// the loops start. SIGPIPE is ignored: a vanished client is a failed write.
public final class TerminationSignals {
    private let sources: [any DispatchSourceSignal]

    /// Starts watching; `handler` runs on a private queue with the signal's name.
    public init(_ handler: @escaping @Sendable (String) -> Void) {
        signal(SIGPIPE, SIG_IGN)
        let queue = DispatchQueue(label: "groserd.signals")
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    deinit { for s in sources { s.cancel() } }
}
