import Foundation
import Testing

/// Background work yields to requests: a real groserd's compaction and
/// import threads run at nice +10 (a load's search indexing too, while it
/// lasts), its event loops and cart shards at the daemon's own priority.
@Suite("thread priorities")
struct ThreadPriorityTests {
    /// Each thread's nice value, by thread name.
    static func niceValues(_ pid: Int32) -> [String: Int] {
        var nice: [String: Int] = [:]
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            guard let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8),
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // The fields after the name's closing parenthesis start at the
            // third (state); nice is the 19th.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            nice[name.trimmingCharacters(in: .whitespacesAndNewlines)] = Int(fields[16])
        }
        return nice
    }

    @Test func backgroundThreadsRunNicerThanTheLoopsAndShards() throws {
        let daemon = try Daemon()
        let pid = daemon.process.processIdentifier
        let own = try #require(Self.niceValues(pid)["groserd"], "no main thread in \(Self.niceValues(pid))")
        let background = min(19, own + 10)  // the kernel's ceiling
        // A thread lowers its own priority once it runs, which may be after
        // groserd first answers (under ASan on a loaded machine it was).
        #expect(eventually {
            let nice = Self.niceValues(pid)
            return nice["groserd-compact"] == background && nice["groserd-import"] == background
        }, "\(Self.niceValues(pid))")
        let nice = Self.niceValues(pid)
        for name in ["groserd-loop0", "groserd-cart0", "groserd-commit"] {
            #expect(nice[name] == own, "\(name): \(nice)")
        }
        #expect(daemon.terminate() == 0)
    }
}
