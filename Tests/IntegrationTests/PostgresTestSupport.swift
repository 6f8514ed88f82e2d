import Foundation
import GroserStorage

/// The throwaway cluster tools/test starts (tools/pg-cluster), as a libpq
/// conninfo; nil when the tests run without one.
let clusterConninfo = ProcessInfo.processInfo.environment["GROSER_TEST_PG"]

/// A database of its own on the test cluster, dropped when released.
final class ScratchDatabase {
    let name: String
    let conninfo: String

    init() throws {
        guard let cluster = clusterConninfo else { throw TestFailure("GROSER_TEST_PG is not set") }
        name = "groser_it_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(cluster)
        try admin.execute("CREATE DATABASE \(name)")
        conninfo = cluster + " dbname=\(name)"
    }

    deinit {
        guard let cluster = clusterConninfo, let admin = try? PostgresConnection(cluster) else { return }
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }
}

/// Runs tools/pg-cluster `command` on `dir`; its standard output (none
/// for the commands that start the server, which outlives them).
@discardableResult
func pgCluster(_ command: String, _ dir: String, tcp: String? = nil) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath + "/tools/pg-cluster")
    p.arguments = [command, dir] + (tcp.map { ["--tcp", $0] } ?? [])
    let out = Pipe()
    let starts = command == "start" || command == "resume"
    p.standardOutput = starts ? FileHandle.nullDevice : out
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let data = starts ? Data() : out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw TestFailure("tools/pg-cluster \(command) exited \(p.terminationStatus)") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
