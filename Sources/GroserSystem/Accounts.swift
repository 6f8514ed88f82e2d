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
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "uid \(uid)" }
        return "uid \(uid) (\(String(cString: name)))"
    }

    /// True when the user `uid` (whose primary group is `gid`) belongs to
    /// `group`: as primary group, or as a member in the group database.
    public static func isMember(uid: UInt32, gid: UInt32, of group: UInt32) -> Bool {
        if gid == group { return true }
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(name, pw.pointee.pw_gid, &groups, &count) == -1 {
            groups = [gid_t](repeating: 0, count: Int(count) * 2)
            count *= 2
        }
        return groups.prefix(Int(count)).contains(group)
    }

    /// Changes a file's group, keeping its owner.
    public static func changeGroup(path: String, to group: UInt32) throws(Errno) {
        _ = try syscall { chown(path, uid_t.max, group) }
    }
}
