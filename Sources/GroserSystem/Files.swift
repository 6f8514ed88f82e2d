#if canImport(Glibc)
import Glibc
import CLinux
#endif

/// File-system calls the daemon and the client need, errno typed.
public enum Files {
    /// Creates `path` and missing parents with `mode`; existing ones are kept.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(Errno) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, mode) != 0 && errno != EEXIST { throw Errno.current }
        }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Creates a fresh directory (mode 0700) named `prefix` plus six random
    /// characters, under `$TMPDIR` or /tmp, and returns its path.
    public static func makeTemporaryDirectory(prefix: String) throws(Errno) -> String {
        let base = ProcessInfo.environment("TMPDIR") ?? "/tmp"
        var template = Array("\(base)/\(prefix)XXXXXX".utf8CString)
        // mkdtemp fills in the template itself: the name is read inside the
        // closure, while the buffer it points into is alive.
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let p = mkdtemp(buffer.baseAddress!) else { return nil }
            return String(cString: p)
        }
        guard let made else { throw Errno.current }
        return made
    }

    /// True when `path` is a Unix socket.
    public static func isSocket(_ path: String) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0 else { return false }
        return (st.st_mode & S_IFMT) == S_IFSOCK
    }

    /// Which file `path` names now (device and inode, not following a
    /// final symlink), or nil when nothing is there. A file deleted or
    /// replaced behind a process's back has another identity, or none.
    public static func identity(_ path: String) -> FileIdentity? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The permission bits of the file `path` names (following symlinks).
    public static func mode(_ path: String) throws(Errno) -> mode_t {
        var st = stat()
        _ = try syscall { stat(path, &st) }
        return st.st_mode & 0o7777
    }

    /// Why this process may not write `path` (access(2) with W_OK: mode,
    /// owner, a read-only file system), or nil when it may.
    public static func writeDenial(_ path: String) -> Errno? {
        access(path, W_OK) == 0 ? nil : Errno.current
    }

    public static func changeMode(_ path: String, to mode: mode_t) throws(Errno) {
        _ = try syscall { chmod(path, mode) }
    }

    /// Creates an empty file with `mode` when nothing exists at `path`, so
    /// that a library that creates it later (with its own wider default)
    /// finds it with the right mode.
    public static func createIfMissing(_ path: String, mode: mode_t) throws(Errno) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd < 0 {
            if errno == EEXIST { return }
            throw Errno.current
        }
        _ = close(fd)
    }

    public static func remove(_ path: String) throws(Errno) {
        _ = try syscall { unlink(path) }
    }

    /// Removes an empty directory.
    public static func removeDirectory(_ path: String) throws(Errno) {
        _ = try syscall { rmdir(path) }
    }

    /// The whole file, or nil when it does not exist.
    public static func read(_ path: String) throws(Errno) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw Errno.current
        }
        defer { _ = close(fd) }
        // The size is a hint (files in /proc say 0): one buffer of that
        // size, doubled when the file turns out longer, read to the end.
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Errno.current }
        var out = [UInt8](repeating: 0, count: max(Int(st.st_size) + 1, 4096))
        var filled = 0
        while true {
            if filled == out.count { out.append(contentsOf: repeatElement(0, count: out.count)) }
            let n = try syscall { out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) } }
            if n == 0 { break }
            filled += n
        }
        out.removeLast(out.count - filled)
        return out
    }

    /// Replaces `path` atomically: writes a temporary file beside it, fsyncs
    /// it, renames it over `path`, and fsyncs the directory.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(Errno) {
        // A fresh name each time, created exclusively: two saves never share
        // a file, and a leftover never lends its wider mode.
        let suffix = (try? KernelRandom.hex(6)) ?? "\(monotonicNanoseconds())"
        let tmp = path + ".tmp.\(getpid()).\(suffix)"
        let fd = try syscall { open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        do {
            var offset = 0
            while offset < bytes.count {
                let n = try syscall { bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) } }
                offset += n
            }
            _ = try syscall { fsync(fd) }
            _ = close(fd)
            _ = try syscall { rename(tmp, path) }
        } catch {
            _ = close(fd)
            _ = unlink(tmp)
            throw error
        }
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let dfd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); _ = close(dfd) }
    }
}

/// A file's device and inode numbers.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
}

/// The process's environment and identity.
public enum ProcessInfo {
    public static func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        let s = String(cString: v)
        return s.isEmpty ? nil : s
    }

    public static var userID: UInt32 { getuid() }
    public static var processID: Int32 { getpid() }
    public static var processorCount: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// The home directory from $HOME, or the password database.
    public static var homeDirectory: String {
        if let h = environment("HOME") { return h }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir { return String(cString: dir) }
        return "/tmp"
    }

    /// Resident memory of this process in kibibytes, from /proc/self/status.
    public static func residentKilobytes(pid: Int32? = nil) -> Int? {
        let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
        guard let bytes = try? Files.read(path) else { return nil }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "")
        }
        return nil
    }
}

/// Standard output and error, unbuffered by Swift: written with write(2).
public enum StandardStreams {
    /// Writes all of `s` to `fd`, retrying EINTR; throws the first error
    /// (ENOSPC on /dev/full, EPIPE), so a command can say its output was lost.
    public static func writeAll(_ s: String, fd: Int32) throws(Errno) {
        var bytes = Array(s.utf8)
        let failure = bytes.withUnsafeMutableBytes { raw -> Errno? in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return Errno.current
                }
                offset += n
            }
            return nil
        }
        if let failure { throw failure }
    }

    /// Writes `s` to `fd`, ignoring errors: for messages on standard error,
    /// where there is nowhere left to report a failure.
    public static func write(_ s: String, fd: Int32) {
        var bytes = Array(s.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
    public static func out(_ s: String) { write(s, fd: 1) }
    public static func err(_ s: String) { write(s, fd: 2) }
}

/// Process resource limits.
public enum ResourceLimits {
    /// Raises the soft limit on open descriptors to `wanted` (at most the
    /// hard limit) and returns the limit now in force.
    @discardableResult
    public static func raiseOpenFiles(to wanted: UInt64) -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return UInt64(limit.rlim_cur)
    }
}

/// The C allocator.
public enum Allocator {
    /// Gives freed heap memory back to the kernel (after a large transient
    /// structure, such as a decoded catalog, is gone).
    ///
    /// Does nothing under AddressSanitizer: ASan serves every allocation
    /// itself, and glibc's `malloc_trim` walking heaps glibc never set up
    /// crashed a test run (SEGV in `mtrim`) on CI.
    public static func returnFreeMemory() {
        guard !underAddressSanitizer else { return }
        _ = malloc_trim(0)
    }

    /// `returnFreeMemory` when the heaps hold more than `bytes` freed
    /// (mallinfo2: free chunks, not counting what is already above the top).
    /// Cheap to ask: it sums malloc's bins, not every chunk.
    public static func returnFreeMemory(ifMoreThan bytes: Int) {
        guard !underAddressSanitizer else { return }
        let info = mallinfo2()
        if Int(info.fordblks) - Int(info.keepcost) > bytes { returnFreeMemory() }
    }

    /// Whether this process runs with AddressSanitizer's runtime, whose
    /// `__asan_init` is exported from the executable.
    public static let underAddressSanitizer: Bool =
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil

    /// Serves every allocation of `bytes` or more with its own mapping,
    /// unmapped when freed. glibc starts at 128 KiB but raises the threshold
    /// to the size of each mapped block freed (up to 32 MiB), after which
    /// buffers of a few MiB come from the heaps and stay resident after they
    /// are freed: after 100 clients' 4 MiB frames were closed, groserd kept
    /// 715 MB. Setting the threshold fixes it where it is.
    public static func mapBlocksSeparately(from bytes: Int) {
        guard !underAddressSanitizer else { return }
        _ = mallopt(M_MMAP_THRESHOLD, Int32(clamping: bytes))
    }
}

/// An exclusive `flock` on a directory, held until the value goes out of
/// scope: processes that read, change and replace a file in the directory
/// take it around the whole cycle, so none undoes another's change. The
/// lock is on the directory itself, so no lock file is left beside the data.
public struct DirectoryLock: ~Copyable {
    private let descriptor: Int32

    /// Waits until the lock on `directory` is free and takes it.
    public init(_ directory: String) throws(Errno) {
        let fd = try syscall { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        do {
            _ = try syscall { flock(fd, LOCK_EX) }
        } catch {
            _ = close(fd)
            throw error
        }
        descriptor = fd
    }

    deinit {
        // Closing the only descriptor of the open file releases the lock.
        _ = close(descriptor)
    }
}
