#if canImport(Glibc)
import Glibc
#endif

/// A file written only at its end, made durable with fdatasync: the
/// customer log's segments. Owned by one thread.
///
/// With `preallocateBytes` the file is kept that many bytes of real zeros
/// ahead of its data (PostgreSQL zero-fills its WAL segments for the same
/// reason): an append then overwrites blocks the file already has, and its
/// fdatasync need not also write the inode's new size and block map, which
/// here makes it about 1.5 times as fast. Readers take zeros to the end of
/// the file as the end of the data.
public final class LogFile {
    public let path: String
    private let fd: Int32
    /// Where the data ends and appends go: what the last good append left.
    public private(set) var size: Int
    /// The file's length: `size` plus the zeros written ahead of it.
    public private(set) var allocated: Int
    private let preallocateBytes: Int

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
        allocated = Int(st.st_size)
        size = min(dataEnd ?? allocated, allocated)
    }

    deinit { _ = close(fd) }

    /// Writes `bytes` at the end and fdatasyncs. On any failure the file is
    /// cut back to its size before the call (so a later append continues
    /// after the last good one) and the error is thrown.
    public func appendDurably(_ bytes: [UInt8]) throws(Errno) {
        let end = size + bytes.count
        do {
            try writeAll(bytes, at: size)
            if end > allocated && preallocateBytes > 0 {
                // Zeros ahead, made durable by the same fdatasync.
                let zeros = [UInt8](repeating: 0, count: preallocateBytes)
                try writeAll(zeros, at: end)
                allocated = end + preallocateBytes
            }
            _ = try syscall { fdatasync(fd) }
        } catch {
            // Whatever part landed is not acknowledged: remove it, so the
            // log never holds a partial record before a good one.
            _ = ftruncate(fd, off_t(size))
            _ = fdatasync(fd)
            allocated = size
            throw error
        }
        size = end
        allocated = max(allocated, end)
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
        size = length
        allocated = length
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
