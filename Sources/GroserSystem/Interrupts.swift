import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// SIGINT for a command-line program: by default the process ends at once
/// with a chosen status (130, as a shell reports a Ctrl-C), after putting
/// back the terminal's echo if a secret prompt had turned it off. A loop
/// that wants to finish its own way (print a summary) asks to be told
/// instead, and polls `happened`.
public enum Interrupts {
    private static let status = Atomic<Int32>(130)
    private static let deferred = Atomic<Bool>(false)
    private static let flag = Atomic<Bool>(false)

    /// Installs the handler. Only async-signal-safe work happens in it:
    /// atomics, tcsetattr and _exit.
    public static func install(exitStatus: Int32) {
        status.store(exitStatus, ordering: .relaxed)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            if Interrupts.deferred.load(ordering: .relaxed) {
                Interrupts.flag.store(true, ordering: .relaxed)
                return
            }
            Terminal.restoreEchoAfterSignal()
            _exit(Interrupts.status.load(ordering: .relaxed))
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGINT, &action, nil)
        // A parent may have started us with SIGINT blocked (Foundation's
        // Process hands on its thread's mask); Ctrl-C must still work.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// Runs `body` with SIGINT only noted (see `happened`), not ending the process.
    public static func deferring<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        deferred.store(true, ordering: .relaxed)
        defer { deferred.store(false, ordering: .relaxed) }
        return try body()
    }

    /// True once SIGINT came while deferred.
    public static var happened: Bool { flag.load(ordering: .relaxed) }
}
