import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

struct TestSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A fresh directory under /tmp, removed with its files when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        // The one mkdtemp wrapper (GroserSystem): it reads the name while
        // the template is alive.
        do { path = try Files.makeTemporaryDirectory(prefix: "groser-storage-tests-") } catch { throw TestSetupError(description: "mkdtemp failed: \(error)") }
    }

    deinit { Self.remove(path) }

    /// Removes `path`: a file, or a directory with everything in it.
    private static func remove(_ path: String) {
        guard let dir = opendir(path) else {
            _ = unlink(path)
            return
        }
        var children: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { children.append(path + "/" + name) }
        }
        closedir(dir)
        for child in children { remove(child) }
        _ = rmdir(path)
    }

    func file(_ name: String) -> String { path + "/" + name }
}

func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let f = fopen(path, "wb") else { throw TestSetupError(description: "cannot create \(path)") }
    defer { fclose(f) }
    let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    guard written == bytes.count else { throw TestSetupError(description: "short write to \(path)") }
}

/// The sqlite3 command-line shell, used to look at a database from outside
/// the code under test. Nil when it is not installed.
let sqlite3Shell: String? = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"]
    .first { access($0, X_OK) == 0 }

/// Runs `sql` on the database at `path` with the sqlite3 shell; its output,
/// lines trimmed.
func sqlite3(_ path: String, _ sql: String) throws -> [String] {
    guard let shell = sqlite3Shell else { throw TestSetupError(description: "no sqlite3 shell") }
    let quote = { (s: String) in
        "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
    guard let pipe = popen("\(shell) -batch \(quote(path)) \(quote(sql)) 2>&1", "r") else {
        throw TestSetupError(description: "popen failed")
    }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, pipe)
        if n == 0 { break }
        output += buffer[0..<n]
    }
    let status = pclose(pipe)
    let lines = String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
    guard status == 0 else { throw TestSetupError(description: "sqlite3 failed: \(lines.joined(separator: " "))") }
    return lines
}

extension String {
    /// Code-point order, as the protocol documents products are sorted.
    func precedesByCodePoint(_ other: String) -> Bool {
        unicodeScalars.lexicographicallyPrecedes(other.unicodeScalars)
    }
}
