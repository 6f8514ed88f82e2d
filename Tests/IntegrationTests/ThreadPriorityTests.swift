import Foundation
import Testing

/// Background work yields to requests: a real groserd's compaction and
/// import threads run at nice +10 (a load's search indexing too, while it
/// lasts), its event loops and cart shards at the daemon's own priority.
@Suite("thread priorities")
struct ThreadPriorityTests {
    @Test func backgroundThreadsRunNicerThanTheLoopsAndShards() throws {
        let daemon = try Daemon()
        let pid = daemon.process.processIdentifier
        var nice: [String: Int] = [:]
        for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            let name = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let stat = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8)
            // The fields after the name's closing parenthesis start at the
            // third (state); nice is the 19th.
            guard let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            nice[name] = Int(fields[16])
        }
        let own = try #require(nice["groserd"], "no main thread in \(nice)")
        let background = min(19, own + 10)  // the kernel's ceiling
        #expect(nice["groserd-compact"] == background, "\(nice)")
        #expect(nice["groserd-import"] == background, "\(nice)")
        for name in ["groserd-loop0", "groserd-cart0", "groserd-commit"] {
            #expect(nice[name] == own, "\(name): \(nice)")
        }
        #expect(daemon.terminate() == 0)
    }
}
