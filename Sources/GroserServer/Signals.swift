import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The signals groserd acts on, delivered through Dispatch sources
/// registered before the loops start. No signal that a service manager or a
/// terminal sends by habit kills groserd without the graceful path:
/// - SIGTERM, SIGINT and SIGQUIT stop it gracefully (`stop`);
/// - SIGHUP (a closed terminal, `systemctl reload`), SIGUSR1 and SIGUSR2
///   are logged and otherwise ignored (`ignored`): groserd logs to standard
///   error, so there is no log file to reopen;
/// - SIGPIPE is ignored: a vanished client is a failed write.
public final class TerminationSignals {
    private let sources: [any DispatchSourceSignal]

    /// The signals that stop groserd gracefully.
    public static let stopping: [(Int32, String)] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGQUIT, "SIGQUIT")]
    /// The signals that are logged and ignored.
    public static let ignoredSignals: [(Int32, String)] = [(SIGHUP, "SIGHUP"), (SIGUSR1, "SIGUSR1"), (SIGUSR2, "SIGUSR2")]

    /// Starts watching; the handlers run on a private queue with the signal's name.
    public init(stop: @escaping @Sendable (String) -> Void, ignored: @escaping @Sendable (String) -> Void) {
        signal(SIGPIPE, SIG_IGN)
        let queue = DispatchQueue(label: "groserd.signals")
        var sources: [any DispatchSourceSignal] = []
        for (signals, handler) in [(Self.stopping, stop), (Self.ignoredSignals, ignored)] {
            for (number, name) in signals {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { handler(name) }
                source.resume()
                sources.append(source)
            }
        }
        self.sources = sources
    }

    deinit { for s in sources { s.cancel() } }
}
