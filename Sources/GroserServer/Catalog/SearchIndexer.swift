import GroserSearch
import GroserSystem

/// Builds stores' search indexes on a thread of its own while the catalog
/// loader reads and encodes the next store: a load's two halves on two
/// cores. At most one store waits for its index beside the one being
/// indexed, so the decoded stores held stay bounded.
final class SearchIndexer: @unchecked Sendable {
    // @unchecked: `thread` is set once in init and read by the loader's
    // thread only; the rest is Sendable.
    private struct Job: Sendable {
        let uid: String
        let shelves: [SearchShelf]
        let previous: SearchIndex?
    }

    private let jobs = BlockingQueue<Job>()
    private let results = Locked<[String: SearchIndex]>([:])
    /// Jobs submitted and not yet indexed.
    private let pending = Locked(0)
    private var thread: OSThread?

    init() {
        let jobs = self.jobs, results = self.results, pending = self.pending
        thread = try? OSThread(name: "groserd-index") {
            // A whole load's indexes (start, import, reload): requests
            // served meanwhile from the previous catalog go first.
            OSThread.runInBackground()
            let stemmer = Stemmer()
            while true {
                let batch = jobs.take(upTo: 1)
                if batch.isEmpty { return }
                for job in batch {
                    let index = SearchIndex.build(shelves: job.shelves, reusing: job.previous, stemmer: stemmer).index
                    results.withLock { $0[job.uid] = index }
                    pending.withLock { $0 -= 1 }
                }
            }
        }
    }

    deinit {
        // A load that failed before `finish`: let the thread end.
        jobs.close()
        thread?.detach()
    }

    /// Queues a store's index; waits while another store is still queued.
    func submit(_ uid: String, _ shelves: [SearchShelf], reusing previous: SearchIndex?) {
        guard thread != nil else {
            // No thread could be started: index here.
            let index = SearchStemmers.pool.with { SearchIndex.build(shelves: shelves, reusing: previous, stemmer: $0).index }
            results.withLock { $0[uid] = index }
            return
        }
        pending.withLock { $0 += 1 }
        jobs.put(Job(uid: uid, shelves: shelves, previous: previous))
        while pending.withLock({ $0 }) > 1 { OSThread.sleep(milliseconds: 1) }
    }

    /// Every index submitted, once the thread has built them all.
    func finish() -> [String: SearchIndex] {
        jobs.close()
        thread?.join()
        thread = nil
        return results.withLock { $0 }
    }
}
