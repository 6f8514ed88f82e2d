/// Where one shard's customer state (sessions, carts, remembered answers)
/// is made durable: the coarse seam between the shard and storage. The
/// customer log implements it with segments and snapshots; a database
/// implements the same four calls with transactions.
public protocol CustomerStore: AnyObject, Sendable {
    /// Rebuilds the shard's state at start; a line saying what was found
    /// (and what a crash left torn and was dropped).
    func load(into state: inout CustomerState) throws(StorageError) -> String
    /// Makes `records` durable: when it returns, they survive a crash.
    /// When it throws, none of them is stored and the store stays usable.
    func append(_ records: [CustomerRecord]) throws(StorageError)
    /// Called by the shard after appends: true when enough was written
    /// since the last checkpoint that `checkpoint` should run.
    func checkpointDue() throws(StorageError) -> Bool
    /// Folds what was written into a checkpoint, dropping what `expire`
    /// drops; runs on another thread while the shard appends. Returns the
    /// sessions kept.
    func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int
}

extension CustomerLog: CustomerStore {
    public func load(into state: inout CustomerState) throws(StorageError) -> String {
        let r = try recover(into: &state)
        var line = "\(directory): \(state.sessions.count) session(s) from \(r.snapshotRecords) snapshot record(s) and \(r.records) logged record(s) in \(r.segments) segment(s)"
        if let t = r.droppedTail {
            line += "; dropped a torn last record of \(t.bytes) byte(s) at byte \(t.offset) of \(t.file) (a crash during an append that was never acknowledged)"
        }
        if state.skippedLineChanges > 0 {
            line += "; skipped \(state.skippedLineChanges) cart line change(s) that did not follow their cart's version (a record before them was cut by --repair): those carts are as they last were before the cut"
        }
        return line
    }

    public func checkpointDue() throws(StorageError) -> Bool {
        guard wantsRotation else { return false }
        try rotate()
        return true
    }

    public func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int {
        try compact(expire: expire)
    }
}
