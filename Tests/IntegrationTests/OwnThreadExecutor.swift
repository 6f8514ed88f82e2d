import GroserSystem

/// A task executor with a thread of its own, for async tests that assert how
/// long something took. Swift Testing runs the suites' blocking tests on the
/// cooperative pool, two threads on this 2-core machine: while they block,
/// an async test's task waits for a thread however fast the code under test
/// was (CI on 6 Dec 2026: a cancelled call measured 31.8 s, most of it spent
/// waiting to be resumed). Run the timed part with
/// `withTaskExecutorPreference(executor)`, and give unstructured tasks
/// `Task(executorPreference:)`: they do not inherit the preference.
final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `thread` is written once in init, read by shutdown.
    private let jobs = BlockingQueue<UnownedJob>()
    private var thread: OSThread?

    init(name: String) throws {
        let jobs = self.jobs
        let executor = UnownedTaskExecutor(ordinary: self)
        thread = try OSThread(name: name) {
            while true {
                let batch = jobs.take(upTo: 64)
                if batch.isEmpty { return }  // closed and drained
                for job in batch { job.runSynchronously(on: executor) }
            }
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        jobs.put(UnownedJob(job))
    }

    /// Runs what is queued, then ends the thread. Call it once the tasks
    /// that prefer this executor have finished.
    func shutdown() {
        jobs.close()
        thread?.join()
    }
}
