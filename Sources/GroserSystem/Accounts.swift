#if canImport(Glibc)
import Glibc
#endif

/// Users and groups from the system's databases (NSS).
public enum Accounts {
    /// A group's id from its name or number; nil when there is no such group.
    public static func groupID(_ nameOrNumber: String) -> UInt32? {
        if let n = UInt32(nameOrNumber) { return n }
        guard let g = getgrnam(nameOrNumber) else { return nil }
        return g.pointee.gr_gid
    }

    /// A user's id from its name or number; nil when there is no such user.
    public static func userID(_ nameOrNumber: String) -> UInt32? {
        if let n = UInt32(nameOrNumber) { return n }
        guard let pw = getpwnam(nameOrNumber) else { return nil }
        return pw.pointee.pw_uid
    }

    /// "uid 65534 (nobody)", or "uid 47213" for a uid with no name.
    public static func describe(uid: UInt32) -> String {
        guard let name = userName(uid) else { return "uid \(uid)" }
        return "uid \(uid) (\(name))"
    }

    /// True when the user `uid` (whose primary group is `gid`) belongs to
    /// `group`: as primary group, or as a member in the group database.
    /// Safe to call from several threads at once (the event loops ask it).
    public static func isMember(uid: UInt32, gid: UInt32, of group: UInt32) -> Bool {
        if gid == group { return true }
        return withPasswordEntry(uid) { pw in
            guard let name = pw.pw_name else { return false }
            var count: Int32 = 64
            var groups = [gid_t](repeating: 0, count: Int(count))
            while getgrouplist(name, pw.pw_gid, &groups, &count) == -1 {
                groups = [gid_t](repeating: 0, count: Int(count) * 2)
                count *= 2
            }
            return groups.prefix(Int(count)).contains(group)
        } ?? false
    }

    /// The login name of `uid`, or nil.
    static func userName(_ uid: UInt32) -> String? {
        withPasswordEntry(uid) { pw in pw.pw_name.map { String(cString: $0) } } ?? nil
    }

    /// Runs `body` with `uid`'s password entry, read with `getpwuid_r` into
    /// a buffer of this call's own (`getpwuid` returns glibc's one static
    /// entry, which another thread's call overwrites); nil when there is none.
    static func withPasswordEntry<T>(_ uid: UInt32, _ body: (passwd) -> T) -> T? {
        var size = max(1024, Int(sysconf(Int32(_SC_GETPW_R_SIZE_MAX))))
        while size <= 1 << 20 {
            // The entry's strings point into the buffer: read only inside.
            let outcome: (rc: Int32, value: T?) = withUnsafeTemporaryAllocation(of: CChar.self, capacity: size) { buffer in
                var entry = passwd()
                var found: UnsafeMutablePointer<passwd>?
                let rc = getpwuid_r(uid, &entry, buffer.baseAddress!, size, &found)
                return (rc, rc == 0 && found != nil ? body(entry) : nil)
            }
            if outcome.rc != ERANGE { return outcome.value }
            size *= 2
        }
        return nil
    }

    /// Changes a file's group, keeping its owner.
    public static func changeGroup(path: String, to group: UInt32) throws(Errno) {
        _ = try syscall { chown(path, uid_t.max, group) }
    }
}
