#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// A file written only at its end, made durable with fdatasync: the
/// customer log's segments. Appended to by one thread.
///
/// With `preallocateBytes` the file is kept up to that many bytes of real
/// zeros ahead of its data (PostgreSQL zero-fills its WAL segments for the
/// same reason): an append then overwrites blocks the file already has, and
/// its fdatasync need not also write the inode's new size and block map,
/// which here makes it about 1.5 times as fast. Readers take zeros to the
/// end of the file as the end of the data.
///
/// The next zeros are written by `ZeroFiller`'s thread once half of them
/// are used, in 64 KiB pieces each written out before the next
/// (sync_file_range), so that an append's fdatasync finds at most one
/// piece to write besides its own data. Written inside an append instead,
/// 1 MiB of zeros made about one fdatasync in 40 take 2-3 ms at c=50 P=16,
/// a pause for every request of that batch (fdatasync p99 2.2 ms; 1.0-1.4
/// ms with the zeros written in advance, and cart-add 9 % faster). An append that finds no zeros ahead
/// (the first one, or one that outran the filler) still writes them itself.
public final class LogFile: @unchecked Sendable {
    // @unchecked: `size` belongs to the appending thread; what the filler
    // shares with it is in `ahead`, behind its lock.
    public let path: String
    fileprivate let fd: Int32
    /// Where the data ends and appends go: what the last good append left.
    public private(set) var size: Int
    fileprivate let preallocateBytes: Int

    fileprivate struct Ahead {
        /// The file's length known to be data or durable zeros.
        var allocated: Int
        /// Everything below this offset may be data: the filler writes no
        /// zeros there (it checks, with the lock held, before each piece).
        var claimed: Int
        /// A fill is queued or running.
        var filling = false
        /// Changed by a cut: a fill begun before it does not count.
        var epoch = 0
    }
    fileprivate let ahead: Locked<Ahead>

    /// The file's length: `size` plus the zeros written ahead of it.
    public var allocated: Int { ahead.withLock { $0.allocated } }

    /// Opens `path` for appending, creating it 0600 when missing. Appends go
    /// at `dataEnd` when given (what a reader found; beyond it the file holds
    /// only zeros), else at the file's current length.
    public init(path: String, dataEnd: Int? = nil, preallocateBytes: Int = 0) throws(Errno) {
        self.path = path
        self.preallocateBytes = max(0, preallocateBytes)
        fd = try syscall { open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600) }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let e = Errno.current
            _ = close(fd)
            throw e
        }
        let length = Int(st.st_size)
        size = min(dataEnd ?? length, length)
        ahead = Locked(Ahead(allocated: length, claimed: size))
    }

    deinit { _ = close(fd) }

    /// Writes `bytes` at the end and fdatasyncs. On any failure the file is
    /// cut back to its size before the call (so a later append continues
    /// after the last good one) and the error is thrown.
    public func appendDurably(_ bytes: [UInt8]) throws(Errno) {
        let end = size + bytes.count
        let covered = ahead.withLock { a in
            a.claimed = max(a.claimed, end)
            return end <= a.allocated
        }
        do {
            try writeAll(bytes, at: size)
            if !covered && preallocateBytes > 0 {
                // No zeros ahead: written here, made durable by the same fdatasync.
                let zeros = [UInt8](repeating: 0, count: preallocateBytes)
                try writeAll(zeros, at: end)
                ahead.withLock { $0.allocated = max($0.allocated, end + preallocateBytes) }
            }
            _ = try syscall { fdatasync(fd) }
        } catch {
            // Whatever part landed is not acknowledged: remove it, so the
            // log never holds a partial record before a good one.
            cut(to: size)
            throw error
        }
        size = end
        guard preallocateBytes > 0 else { return }
        let wantsFill = ahead.withLock { a in
            a.allocated = max(a.allocated, end)
            guard !a.filling && a.allocated - end < preallocateBytes / 2 else { return false }
            a.filling = true
            return true
        }
        if wantsFill { ZeroFiller.shared.fill(self) }
    }

    /// Cuts the file at `length` (the filler writes no piece meanwhile:
    /// it holds the same lock while it writes one).
    private func cut(to length: Int) {
        ahead.withLock { a in
            _ = ftruncate(fd, off_t(length))
            _ = fdatasync(fd)
            a.allocated = length
            a.claimed = length
            a.epoch += 1
        }
    }

    private func writeAll(_ bytes: [UInt8], at start: Int) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let n = try syscall { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + offset, $0.count - offset, off_t(start + offset)) } }
            offset += n
        }
    }

    /// Cuts the file to `length` bytes, durably.
    public func truncate(to length: Int) throws(Errno) {
        try ahead.withLock { (a) throws(Errno) in
            _ = try syscall { ftruncate(fd, off_t(length)) }
            _ = try syscall { fdatasync(fd) }
            a.allocated = length
            a.claimed = length
            a.epoch += 1
        }
        size = length
    }

    /// The names in `directory` (without "." and "..").
    public static func names(in directory: String) throws(Errno) -> [String] {
        guard let dir = opendir(directory) else { throw Errno.current }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Makes the directory's entries (a create, rename or unlink) durable.
    public static func syncDirectory(_ directory: String) throws(Errno) {
        let dfd = try syscall { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { _ = close(dfd) }
        _ = try syscall { fsync(dfd) }
    }

    /// Renames `from` to `to` (atomically replacing it).
    public static func rename(_ from: String, to: String) throws(Errno) {
        _ = try syscall { Glibc.rename(from, to) }
    }
}

/// The thread that writes zeros ahead of log files' data (LogFile), one for
/// the process: a fill is 1 MiB written about once per MiB of appends, and
/// the files of every shard share it.
final class ZeroFiller: Sendable {
    static let shared = ZeroFiller()
    static let pieceBytes = 64 << 10
    private let queue = BlockingQueue<LogFile>()

    private init() {
        let queue = self.queue
        do {
            let thread = try OSThread(name: "groserd-zeros") {
                OSThread.runInBackground()
                let zeros = [UInt8](repeating: 0, count: ZeroFiller.pieceBytes)
                while true {
                    for file in queue.take(upTo: 16) { ZeroFiller.fill(file, zeros) }
                }
            }
            thread.detach()
        } catch {
            // No thread: the queue is closed, and appends write their zeros themselves.
            queue.close()
        }
    }

    /// Queues a fill of `file` (its `filling` already set).
    func fill(_ file: LogFile) {
        if !queue.put(file) { file.ahead.withLock { $0.filling = false } }
    }

    /// Writes `preallocateBytes` of zeros after what `file` has, a piece at
    /// a time, then fdatasyncs and publishes them. Stops without publishing
    /// when an append claims the space first, a cut happens, or a write
    /// fails (a full disk): the appending thread then writes its own.
    private static func fill(_ file: LogFile, _ zeros: [UInt8]) {
        let (from, epoch) = file.ahead.withLock { ($0.allocated, $0.epoch) }
        let to = from + file.preallocateBytes
        var at = from
        var ok = true
        while ok && at < to {
            let count = min(pieceBytes, to - at)
            ok = file.ahead.withLock { a in
                guard a.epoch == epoch && a.claimed <= at else { return false }
                return zeros.withUnsafeBytes { pwrite(file.fd, $0.baseAddress!, count, off_t(at)) } == count
            }
            if ok { ok = groser_write_out_range(file.fd, off_t(at), off_t(count)) == 0 }
            at += count
        }
        if ok { ok = fdatasync(file.fd) == 0 }
        file.ahead.withLock { a in
            if ok && a.epoch == epoch { a.allocated = max(a.allocated, to) }
            a.filling = false
        }
    }
}
