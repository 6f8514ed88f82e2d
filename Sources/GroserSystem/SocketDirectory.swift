#if canImport(Glibc)
import Glibc
#endif

/// Where groserd listens and its clients connect, and whether a person
/// chose that place or it is the per-user default.
public struct SocketLocation: Sendable, Hashable {
    /// The socket file's path.
    public var path: String
    /// True when the path was named (`--socket`, `GROSER_SOCKET`): it is
    /// used as given. False for the per-user default, whose directory both
    /// the daemon and the client check before trusting it.
    public var isExplicit: Bool

    public init(path: String, isExplicit: Bool) {
        self.path = path
        self.isExplicit = isExplicit
    }

    /// `$GROSER_SOCKET` (explicit), else `$XDG_RUNTIME_DIR/groser/groserd.sock`,
    /// else `/tmp/groser-<uid>/groserd.sock`.
    public static func fromEnvironment() -> SocketLocation {
        if let path = ProcessInfo.environment("GROSER_SOCKET") { return SocketLocation(path: path, isExplicit: true) }
        if let runtime = ProcessInfo.environment("XDG_RUNTIME_DIR") {
            return SocketLocation(path: runtime + "/groser/groserd.sock", isExplicit: false)
        }
        return SocketLocation(path: "/tmp/groser-\(ProcessInfo.userID)/groserd.sock", isExplicit: false)
    }

    /// The directory holding the socket ("." for a bare file name).
    public var directory: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// The check of a socket's directory that groserd and groser-client share.
/// Whoever may write to the directory may rename the daemon's socket away
/// and bind their own in its place, and then reads what clients send (a
/// card number at checkout). So, as tmux and ssh-agent do, the directory is
/// examined with `lstat` and refused unless only trusted users can change it.
public enum SocketDirectory {
    /// What the directory must be.
    public enum Policy: Sendable, Hashable {
        /// A per-user default directory: a real directory (not a symbolic
        /// link), owned by one of `owners`, writable by neither group nor others.
        case privateTo(owners: [UInt32])
        /// A directory a person named: links are followed and any owner is
        /// accepted, but a directory others may write to needs the sticky
        /// bit (as /tmp has), so that nobody else can rename the socket.
        case named
    }

    /// The directory's state under `policy`.
    public static func check(_ directory: String, _ policy: Policy) -> SocketDirectoryCheck {
        var st = stat()
        let found: Int32
        switch policy {
        case .privateTo: found = lstat(directory, &st)
        case .named: found = stat(directory, &st)
        }
        if found != 0 {
            let error = Errno.current
            if error == .noSuchFileOrDirectory { return .missing }
            return .refused(SocketDirectoryProblem(directory: directory, reason: .cannotInspect(error)))
        }
        func refuse(_ reason: SocketDirectoryProblem.Reason) -> SocketDirectoryCheck {
            .refused(SocketDirectoryProblem(directory: directory, reason: reason))
        }
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { return refuse(.symbolicLink) }
        if type != S_IFDIR { return refuse(.notADirectory) }
        let mode = UInt32(st.st_mode & 0o7777)
        let writableByOthers = mode & 0o022 != 0
        switch policy {
        case .privateTo(let owners):
            if !owners.contains(st.st_uid) { return refuse(.ownedByAnotherUser(owner: st.st_uid, expected: owners)) }
            if writableByOthers { return refuse(.writableByOthers(mode: mode)) }
        case .named:
            if writableByOthers && mode & UInt32(S_ISVTX) == 0 { return refuse(.writableByOthers(mode: mode)) }
        }
        return .trusted
    }

    /// Creates `directory` with exactly `mode` (not narrowed by the umask)
    /// and, when given, `group`; missing parents are created 0700. A
    /// directory that already exists is left as it is, whoever made it:
    /// call `check` afterwards, which is what decides whether to trust it.
    public static func create(_ directory: String, mode: mode_t, group: UInt32?) throws(Errno) {
        if let slash = directory.lastIndex(of: "/"), slash != directory.startIndex {
            try Files.makeDirectories(String(directory[..<slash]), mode: 0o700)
        }
        if mkdir(directory, 0o700) != 0 {
            if errno == EEXIST { return }
            throw Errno.current
        }
        // Changed through a descriptor of the directory just made, never a
        // path that someone could have swapped for a link in the meantime.
        let fd = try syscall { open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        defer { _ = close(fd) }
        if let group { _ = try syscall { fchown(fd, uid_t.max, group) } }
        _ = try syscall { fchmod(fd, mode) }
    }
}

/// What `SocketDirectory.check` found.
public enum SocketDirectoryCheck: Sendable, Hashable {
    /// The directory is fit to hold the socket.
    case trusted
    /// Nothing is at the path (the daemon then creates the directory).
    case missing
    /// The directory must not be used, and why.
    case refused(SocketDirectoryProblem)
}

/// Why a socket directory is not trusted, in words a person can act on.
public struct SocketDirectoryProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        case symbolicLink
        case notADirectory
        /// Owned by `owner`, who is none of `expected`.
        case ownedByAnotherUser(owner: UInt32, expected: [UInt32])
        /// Group or others may write to it (`mode` holds its permission bits).
        case writableByOthers(mode: UInt32)
        /// `lstat` or `stat` failed with something other than "no such file".
        case cannotInspect(Errno)
    }

    public var directory: String
    public var reason: Reason

    public init(directory: String, reason: Reason) {
        self.directory = directory
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .symbolicLink:
            return "\(directory) is a symbolic link, not a directory of its own"
        case .notADirectory:
            return "\(directory) is not a directory"
        case .ownedByAnotherUser(let owner, let expected):
            let names = expected.map { $0 == 0 ? "root" : "uid \($0)" }.joined(separator: " or ")
            return "\(directory) belongs to uid \(owner), not to \(names)"
        case .writableByOthers(let mode):
            let who = mode & 0o020 != 0 ? (mode & 0o002 != 0 ? "its group and others" : "its group") : "others"
            let octal = String(mode, radix: 8)
            return "\(directory) is writable by \(who) (mode \(String(repeating: "0", count: max(0, 4 - octal.count)) + octal))"
        case .cannotInspect(let error):
            return "cannot inspect \(directory): \(error)"
        }
    }
}
