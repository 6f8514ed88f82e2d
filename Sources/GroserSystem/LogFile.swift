#if canImport(Glibc)
import Glibc
#endif

/// A file written only at its end, made durable with fdatasync: the
/// customer log's segments. Owned by one thread.
public final class LogFile {
    public let path: String
    private let fd: Int32
    /// Bytes known to be in the file: what the last good append left.
    public private(set) var size: Int

    /// Opens `path` for appending, creating it 0600 when missing; the file's
    /// current length is where appends go.
    public init(path: String) throws(Errno) {
        self.path = path
        fd = try syscall { open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600) }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let e = Errno.current
            _ = close(fd)
            throw e
        }
        size = Int(st.st_size)
    }

    deinit { _ = close(fd) }

    /// Writes `bytes` at the end and fdatasyncs. On any failure the file is
    /// cut back to its size before the call (so a later append continues
    /// after the last good one) and the error is thrown.
    public func appendDurably(_ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        do {
            while offset < bytes.count {
                let n = try syscall { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + offset, $0.count - offset, off_t(size + offset)) } }
                offset += n
            }
            _ = try syscall { fdatasync(fd) }
        } catch {
            // Whatever part landed is not acknowledged: remove it, so the
            // log never holds a partial record before a good one.
            _ = ftruncate(fd, off_t(size))
            _ = fdatasync(fd)
            throw error
        }
        size += bytes.count
    }

    /// Cuts the file to `length` bytes, durably.
    public func truncate(to length: Int) throws(Errno) {
        _ = try syscall { ftruncate(fd, off_t(length)) }
        _ = try syscall { fdatasync(fd) }
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
