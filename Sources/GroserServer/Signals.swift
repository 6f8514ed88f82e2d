#if canImport(Glibc)
import Glibc
#endif
import GroserSystem

/// The signals groserd acts on, taken by a thread of their own with
/// `sigwait`. No signal that a service manager or a terminal sends by habit
/// kills groserd without the graceful path:
/// - SIGTERM, SIGINT and SIGQUIT stop it gracefully (`stop`);
/// - SIGHUP (a closed terminal, `systemctl reload`), SIGUSR1 and SIGUSR2
///   are logged and otherwise ignored (`ignored`): groserd logs to standard
///   error, so there is no log file to reopen;
/// - SIGPIPE is ignored: a vanished client is a failed write.
///
/// `blockAll()` must run first thing in main, before any thread starts:
/// every thread inherits the blocked set, so a signal that arrives at any
/// moment (a SIGTERM right after start-up included) waits, pending, until
/// the signal thread takes it. (Dispatch signal sources, used before, armed
/// themselves asynchronously: a SIGTERM in the first moments was ignored,
/// and groserd never stopped.)
public final class TerminationSignals: Sendable {
    /// The signals that stop groserd gracefully.
    public static let stopping: [(Int32, String)] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGQUIT, "SIGQUIT")]
    /// The signals that are logged and ignored.
    public static let ignoredSignals: [(Int32, String)] = [(SIGHUP, "SIGHUP"), (SIGUSR1, "SIGUSR1"), (SIGUSR2, "SIGUSR2")]

    private static var handled: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for (number, _) in stopping + ignoredSignals { sigaddset(&set, number) }
        return set
    }

    /// Blocks the handled signals in the calling thread, and so in every
    /// thread it starts afterwards; ignores SIGPIPE.
    public static func blockAll() {
        signal(SIGPIPE, SIG_IGN)
        var set = handled
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts the thread that takes the signals `blockAll` blocked and runs
    /// the handler of each, on that thread, with the signal's name.
    public init(stop: @escaping @Sendable (String) -> Void, ignored: @escaping @Sendable (String) -> Void) throws(Errno) {
        Self.blockAll()
        let thread = try OSThread(name: "groserd-signals") {
            var set = Self.handled
            while true {
                var number: Int32 = 0
                guard sigwait(&set, &number) == 0 else { continue }
                if let (_, name) = Self.stopping.first(where: { $0.0 == number }) {
                    stop(name)
                } else if let (_, name) = Self.ignoredSignals.first(where: { $0.0 == number }) {
                    ignored(name)
                }
            }
        }
        thread.detach()
    }
}
