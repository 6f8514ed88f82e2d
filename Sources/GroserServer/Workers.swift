import GroserSystem

/// The worker threads a request leaves its event loop for, one per
/// executor the method registry names: the customer shards and account
/// workers (`CustomerService`), the commit queue and the import thread.
/// Started before the loops and stopped after them.
final class Workers: Sendable {
    let customers: CustomerService
    let commits: CommitQueue
    let imports: ImportService

    init(customers: CustomerService, commits: CommitQueue, imports: ImportService) {
        self.customers = customers
        self.commits = commits
        self.imports = imports
    }

    func start() throws(Errno) {
        try commits.start()
        try imports.start()
        try customers.start()
    }

    /// Stops each once its work in progress is done; what is still queued
    /// is dropped unanswered (the loops have stopped: nobody waits for it).
    func stop() {
        commits.stop()
        imports.stop()
        customers.stop()
    }
}
