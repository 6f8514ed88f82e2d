#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// A file written only at its end, made durable with fdatasync: the
/// customer log's segments. Owned by one thread.
///
/// With `preallocateBytes` the file is kept up to 1.5 times that many bytes
/// of real zeros ahead of its data (PostgreSQL zero-fills its WAL segments
/// for the same reason): an append then overwrites blocks the file already
/// has, and its fdatasync need not also write the inode's new size and
/// block map, which here makes it about 1.5 times as fast. Readers take
/// zeros to the end of the file as the end of the data.
///
/// The next zeros are written by `ZeroFiller`'s thread once half of them
/// are used, in 64 KiB pieces each written out before the next
/// (sync_file_range), so that an append's fdatasync finds at most one
/// piece to write besides its own data. Written inside an append instead,
/// 1 MiB of zeros made about one fdatasync in 40 take 2-3 ms at c=50 P=16,
/// a pause for every request of that batch (fdatasync p99 2.2 ms; 1.0-1.4
/// ms with the zeros written in advance, and cart-add 9 % faster). An
/// append that finds no zeros ahead writes them itself, as before: the
/// first one, or one that outran the filler (it waits for the fill in
/// progress first, so that no data is ever written where the filler
/// writes; see `ZerosAhead`).
public final class LogFile {
    public let path: String
    private let fd: Int32
    /// Where the data ends and appends go: what the last good append left.
    /// (Not checked for exclusivity at run time: its appender's thread
    /// only, and a checked access cost about 80 instructions an append.)
    @exclusivity(unchecked) public private(set) var size: Int
    private let ahead: ZerosAhead

    /// The file's length: `size` plus the zeros written ahead of it.
    public var allocated: Int { ahead.state.withLock { $0.allocated } }

    /// Opens `path` for appending, creating it 0600 when missing. Appends go
    /// at `dataEnd` when given (what a reader found; beyond it the file holds
    /// only zeros), else at the file's current length.
    public init(path: String, dataEnd: Int? = nil, preallocateBytes: Int = 0) throws(Errno) {
        self.path = path
        fd = try syscall { open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600) }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let e = Errno.current
            _ = close(fd)
            throw e
        }
        let length = Int(st.st_size)
        size = min(dataEnd ?? length, length)
        // The filler writes through a file description of its own: a write-back
        // error is reported once per description, so on a shared one the
        // filler's sync could take the error an append's fdatasync must see.
        let fillerFD = preallocateBytes > 0 ? open(path, O_WRONLY | O_CLOEXEC) : -1
        // (Without one, appends still write zeros ahead, themselves.)
        ahead = ZerosAhead(fd: fillerFD, bytes: fillerFD >= 0 ? preallocateBytes : 0, allocated: length)
        inlineZeroBytes = max(0, preallocateBytes)
    }

    /// How many zeros an append writes when it finds none ahead.
    private let inlineZeroBytes: Int

    /// Tests: appends that waited for a fill, and a pause that makes the
    /// filler late.
    var appendsThatWaitedForAFill: Int { ahead.state.withLock { $0.appendsThatWaited } }
    func pauseFills(milliseconds: Int) { ahead.state.withLock { $0.pauseBeforeFillMilliseconds = milliseconds } }
    var isFilling: Bool { ahead.state.withLock { $0.filling } }
    var fillBeingWrittenFrom: Int? { ahead.state.withLock { $0.fillingFrom } }

    deinit {
        // A sealed segment needs no more zeros: a fill still queued or
        // running for it stops at its next piece.
        ahead.state.withLock { $0.epoch += 1 }
        _ = close(fd)
    }

    /// Writes `bytes` at the end and fdatasyncs. On any failure the file is
    /// cut back to its size before the call (so a later append continues
    /// after the last good one) and the error is thrown.
    public func appendDurably(_ bytes: [UInt8]) throws(Errno) {
        let end = size + bytes.count
        // Past the zeros while the filler writes the next ones: wait for it
        // (it is then writing where this append would), then see again.
        var (covered, waits) = ahead.state.withLock { (end <= $0.allocated, end > $0.allocated && $0.filling) }
        if waits {
            covered = ahead.state.withLock(when: { end <= $0.allocated || !$0.filling }) { a in
                a.appendsThatWaited += 1
                return end <= a.allocated
            }
        }
        do {
            try writeAll(bytes, at: size)
            if !covered && inlineZeroBytes > 0 {
                // No zeros ahead: written here, made durable by the same fdatasync.
                let zeros = [UInt8](repeating: 0, count: inlineZeroBytes)
                try writeAll(zeros, at: end)
                ahead.state.withLock { $0.allocated = max($0.allocated, end + inlineZeroBytes) }
            }
            _ = try syscall { fdatasync(fd) }
        } catch {
            // Whatever part landed is not acknowledged: remove it, so the
            // log never holds a partial record before a good one.
            cut(to: size)
            throw error
        }
        size = end
        let bytes = ahead.bytes
        let wantsFill = ahead.state.withLock { a in
            a.allocated = max(a.allocated, end)
            guard bytes > 0 && !a.filling && a.allocated - end < bytes / 2 else { return false }
            a.filling = true
            return true
        }
        if wantsFill { ZeroFiller.shared.fill(ahead) }
    }

    /// Cuts the file at `length` whatever happens (a failed append's bytes
    /// must go); a fill in progress stops at its next piece.
    private func cut(to length: Int) {
        _ = ftruncate(fd, off_t(length))
        _ = fdatasync(fd)
        zerosEnd(at: length)
    }

    /// The file now ends at `length`: no zeros ahead, and a fill begun
    /// before does not count.
    private func zerosEnd(at length: Int) {
        ahead.state.withLock { a in
            a.allocated = length
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
        _ = try syscall { ftruncate(fd, off_t(length)) }
        _ = try syscall { fdatasync(fd) }
        zerosEnd(at: length)
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

/// What a log file's appends share with the filler: the zeros written ahead.
///
/// Why the filler needs no lock while it writes: a fill covers
/// [allocated, allocated + bytes) as `allocated` was when it began, and
/// `allocated` does not move while `filling` is set (only the filler's end
/// or a cut moves it then). Appends below it write below that range; an
/// append that would go past it waits in `appendDurably` until the fill
/// ends. So no data is written where the filler writes, and the filler's
/// sync_file_range (whole pages inside its range only) never writes out a
/// page of an append still in flight.
final class ZerosAhead: @unchecked Sendable {
    // @unchecked: `fd` and `bytes` are constants; `state` is behind its lock.
    struct State {
        /// The file's length known to be data or durable zeros.
        var allocated: Int
        /// A fill is queued or running.
        var filling = false
        /// Changed by a cut: a fill begun before it stops and does not count.
        var epoch = 0
        /// Where the fill being written begins (nil: none being written).
        var fillingFrom: Int?
        /// Appends that waited for a fill (tests).
        var appendsThatWaited = 0
        /// How long the filler sleeps once it knows where a fill goes, before
        /// it writes (tests: to be outrun).
        var pauseBeforeFillMilliseconds = 0
    }
    /// The filler's own description of the file (-1: none).
    let fd: Int32
    /// Zeros a fill writes (0: no fills).
    let bytes: Int
    let state: Locked<State>

    init(fd: Int32, bytes: Int, allocated: Int) {
        self.fd = fd
        self.bytes = bytes
        state = Locked(State(allocated: allocated))
    }

    deinit { if fd >= 0 { _ = close(fd) } }
}

/// The thread that writes zeros ahead of log files' data (LogFile), one for
/// the process: a fill is 1 MiB written about once per 1 MiB of appends, and
/// the files of every shard share it.
final class ZeroFiller: Sendable {
    static let shared = ZeroFiller()
    static let pieceBytes = 64 << 10
    static let pageBytes = 4096
    private let queue = BlockingQueue<ZerosAhead>()

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
    func fill(_ file: ZerosAhead) {
        if !queue.put(file) { Self.finish(file, publishing: nil) }
    }

    /// Writes `file.bytes` of zeros after what the file has, a piece at a
    /// time, then fdatasyncs and publishes them. Stops without publishing
    /// when a cut happens or a write fails (a full disk): appends then
    /// write their own.
    private static func fill(_ file: ZerosAhead, _ zeros: [UInt8]) {
        let (from, epoch, pause) = file.state.withLock { a in
            a.fillingFrom = a.allocated
            return (a.allocated, a.epoch, a.pauseBeforeFillMilliseconds)
        }
        if pause > 0 { OSThread.sleep(milliseconds: pause) }
        let to = from + file.bytes
        var at = from
        var ok = true
        while ok && at < to {
            let count = min(pieceBytes, to - at)
            ok = file.state.withLock { $0.epoch == epoch }
                && zeros.withUnsafeBytes({ pwrite(file.fd, $0.baseAddress!, count, off_t(at)) }) == count
            // Whole pages only: the page holding `from` may also hold the
            // end of an append not yet made durable.
            let first = (at + pageBytes - 1) / pageBytes * pageBytes
            if ok && at + count > first {
                ok = groser_write_out_range(file.fd, off_t(first), off_t(at + count - first)) == 0
            }
            at += count
        }
        if ok { ok = fdatasync(file.fd) == 0 }
        finish(file, publishing: ok ? (to, epoch) : nil)
    }

    private static func finish(_ file: ZerosAhead, publishing: (to: Int, epoch: Int)?) {
        file.state.withLock { a in
            if let p = publishing, a.epoch == p.epoch { a.allocated = max(a.allocated, p.to) }
            a.filling = false
            a.fillingFrom = nil
        }
        file.state.wakeWaiters()
    }
}
