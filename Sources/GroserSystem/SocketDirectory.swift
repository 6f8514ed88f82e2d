#if canImport(Glibc)
import Glibc
#endif

/// Where groserd listens and its clients connect, whether a person
/// chose that place or it is the per-user default, and whose server a
/// client accepts there.
public struct SocketLocation: Sendable, Hashable {
    /// The socket file's path.
    public var path: String
    /// True when the path was named (`--socket`, `GROSER_SOCKET`): it is
    /// used as given. False for the per-user default, whose directory both
    /// the daemon and the client check before trusting it.
    public var isExplicit: Bool
    /// A uid, besides the client's own and root, whose server a client
    /// talks to (`--expect-server-uid`, `GROSER_SERVER_UID`): groserd's user
    /// when it runs as another user and this one reaches it through the
    /// socket group. A client reads who answers (SO_PEERCRED) and sends
    /// nothing to anyone else.
    public var expectedServerUID: UInt32?

    public init(path: String, isExplicit: Bool, expectedServerUID: UInt32? = nil) {
        self.path = path
        self.isExplicit = isExplicit
        self.expectedServerUID = expectedServerUID
    }

    /// `$GROSER_SOCKET` (explicit), else `$XDG_RUNTIME_DIR/groser/groserd.sock`
    /// when `XDG_RUNTIME_DIR` is an absolute path (a relative or empty one is
    /// ignored, as the XDG Base Directory specification asks), else
    /// `/tmp/groser-<uid>/groserd.sock`; with `$GROSER_SERVER_UID` (a uid or
    /// a user name) as the expected server uid. A `GROSER_SERVER_UID` that
    /// names no user is left out, which can only refuse more servers.
    public static func fromEnvironment() -> SocketLocation {
        let expected = ProcessInfo.environment("GROSER_SERVER_UID").flatMap(Accounts.userID)
        if let path = ProcessInfo.environment("GROSER_SOCKET") {
            return SocketLocation(path: path, isExplicit: true, expectedServerUID: expected)
        }
        if let runtime = ProcessInfo.environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") {
            return SocketLocation(path: runtime + "/groser/groserd.sock", isExplicit: false, expectedServerUID: expected)
        }
        return SocketLocation(path: "/tmp/groser-\(ProcessInfo.userID)/groserd.sock", isExplicit: false, expectedServerUID: expected)
    }

    /// The directory holding the socket ("." for a bare file name).
    public var directory: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The socket's name inside `directory`.
    public var fileName: String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// The uids whose server a client of this user accepts: its own, root
    /// and the expected one.
    public var acceptedServerUIDs: [UInt32] {
        var uids = [ProcessInfo.userID]
        if geteuid() != ProcessInfo.userID { uids.append(geteuid()) }
        for uid in [0] + (expectedServerUID.map { [$0] } ?? []) where !uids.contains(uid) { uids.append(uid) }
        return uids
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

    /// Checks every directory above `directory`, from "/" down to its
    /// parent: each must be a directory that group and others may not write
    /// to unless it has the sticky bit (as /tmp), and, when `owners` is
    /// given, must belong to one of them; whoever may write to a parent can
    /// rename the directory away and put their own in its place. Links are
    /// followed here (/var/run is one): what they lead to is checked. Only
    /// an absolute `directory` has parents to check. Nil when all are fit.
    public static func checkParents(of directory: String, owners: [UInt32]?) -> SocketDirectoryProblem? {
        guard directory.hasPrefix("/") else { return nil }
        var parents = ["/"]
        var prefix = ""
        for component in directory.split(separator: "/").dropLast() {
            prefix += "/" + component
            parents.append(prefix)
        }
        for parent in parents {
            var st = stat()
            guard stat(parent, &st) == 0 else {
                return SocketDirectoryProblem(directory: parent, reason: .cannotInspect(Errno.current))
            }
            guard st.st_mode & S_IFMT == S_IFDIR else { return SocketDirectoryProblem(directory: parent, reason: .notADirectory) }
            if let owners, !owners.contains(st.st_uid) {
                return SocketDirectoryProblem(directory: parent, reason: .ownedByAnotherUser(owner: st.st_uid, expected: owners))
            }
            let mode = UInt32(st.st_mode & 0o7777)
            if mode & 0o022 != 0 && mode & UInt32(S_ISVTX) == 0 {
                return SocketDirectoryProblem(directory: parent, reason: .writableByOthers(mode: mode))
            }
        }
        return nil
    }

    /// Opens the per-user default `directory` to connect through
    /// (`O_PATH | O_DIRECTORY | O_NOFOLLOW`) and checks what was opened
    /// (`fstat`): a directory, owned by one of `owners`, writable by neither
    /// group nor others, under parents `checkParents` accepts. A client
    /// connects to `/proc/self/fd/N/<socket>` of the descriptor, so a rename
    /// between this check and the connect cannot swap the directory.
    public static func open(_ directory: String, owners: [UInt32]) -> SocketDirectoryOpening {
        if let problem = checkParents(of: directory, owners: owners) { return .refused(problem) }
        func refuse(_ reason: SocketDirectoryProblem.Reason) -> SocketDirectoryOpening {
            .refused(SocketDirectoryProblem(directory: directory, reason: reason))
        }
        let fd = Glibc.open(directory, oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            let error = Errno.current
            if error == .noSuchFileOrDirectory { return .missing }
            if error.rawValue == ENOTDIR {
                // O_NOFOLLOW with O_DIRECTORY fails a link with ENOTDIR too:
                // lstat only chooses the words, the refusal is already made.
                var st = stat()
                return refuse(lstat(directory, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK ? .symbolicLink : .notADirectory)
            }
            return refuse(.cannotInspect(error))
        }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let error = Errno.current
            _ = Glibc.close(fd)
            return refuse(.cannotInspect(error))
        }
        let mode = UInt32(st.st_mode & 0o7777)
        let reason: SocketDirectoryProblem.Reason? =
            st.st_mode & S_IFMT != S_IFDIR ? .notADirectory
            : !owners.contains(st.st_uid) ? .ownedByAnotherUser(owner: st.st_uid, expected: owners)
            : mode & 0o022 != 0 ? .writableByOthers(mode: mode) : nil
        if let reason {
            _ = Glibc.close(fd)
            return refuse(reason)
        }
        return .opened(descriptor: fd)
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
        let fd = try syscall { Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
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

/// Linux's O_PATH (a descriptor that names a directory without the right to
/// read it), which Glibc's Swift module leaves out (it needs _GNU_SOURCE).
private let oPath: Int32 = 0o10000000

/// What `SocketDirectory.open` found.
public enum SocketDirectoryOpening: Sendable, Hashable {
    /// The directory, checked, open as an `O_PATH` descriptor the caller closes.
    case opened(descriptor: Int32)
    /// Nothing is at the path: no daemon made it, so none listens there.
    case missing
    /// The directory (or a parent) must not be used, and why.
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
