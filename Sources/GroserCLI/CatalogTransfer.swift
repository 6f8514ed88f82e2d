import GroserClient
import GroserCommandLine
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// A catalog file refused before anything was sent: its errors, one line each.
struct CatalogFileRefused: Error {
    var lines: [String]
}

/// `admin import` and `admin export`.
enum CatalogTransfer {
    /// Records per ImportCatalog request: about 150 KB encoded, far below
    /// the frame maximum, and few enough round trips.
    static let chunkRecords = 500
    static let maximumReportedErrors = 100

    /// Checks the whole file first (every bad line reported, nothing sent),
    /// then streams it in chunks and commits; groserd applies it at once.
    static func importFile(_ path: String, replace: Bool, _ ctx: Context) throws {
        // Pass 1: the file's own rules.
        var errors: [String] = []
        var errorCount = 0
        var records = 0
        var ended: (count: Int, line: Int)?
        var reader: LineReader
        do { reader = try LineReader(path: path) } catch { throw UsageError("cannot open \(path): \(error)") }
        func report(_ line: Int, _ reason: String) {
            errorCount += 1
            if errors.count < maximumReportedErrors { errors.append("\(path):\(line): \(reason)") }
        }
        while let (line, terminated) = try reader.next() {
            let n = reader.lineNumber
            if !terminated { report(n, "the last line has no \\n; the file may be truncated") }
            if let end = ended { report(n, "a line after the end record (line \(end.line))"); continue }
            do {
                switch try CatalogFile.parse(line) {
                case .header:
                    if n != 1 { report(n, "a second header") }
                case .record:
                    if n == 1 { report(1, "the first line must be the header {\"type\":\"catalog\",\"format\":1}") }
                    records += 1
                case .end(let count):
                    ended = (count, n)
                    if count != records { report(n, "the end record counts \(count) records, but the file holds \(records)") }
                }
            } catch {
                if error.isRecord { records += 1 }
                report(n, error.reason)
            }
        }
        reader.close()
        if reader.lineNumber == 0 { report(1, "the file is empty") }
        if ended == nil && reader.lineNumber > 0 {
            report(reader.lineNumber + 1, "the file ends without its end record; it may be truncated")
        }
        if errorCount > 0 {
            var lines = errors
            if errorCount > errors.count { lines.append("… and \(errorCount - errors.count) more errors") }
            lines.append("\(path): \(errorCount) error\(errorCount == 1 ? "" : "s"); nothing was imported")
            throw CatalogFileRefused(lines: lines)
        }

        // Pass 2: stream the records; groserd checks references and applies.
        let client = ctx.client()
        let progress = Progress(total: records, enabled: ProcessInfo.isTerminal(2) && !ctx.options.json)
        var chunk: [NumberedRecord] = []
        chunk.reserveCapacity(chunkRecords)
        var importID: UInt64 = 0
        func send(commit: Bool) throws {
            let result = try client.importCatalog(ImportChunk(importID: importID, records: chunk, replace: replace && importID == 0,
                                                              commit: commit), timeout: commit ? 600 : 60)
            importID = result.importID
            chunk.removeAll(keepingCapacity: true)
            progress.update(Int(result.records))
            if commit {
                progress.finish()
                ctx.print(.importCatalog(result),
                          human: "Imported \(result.records) records: \(result.products) products in \(result.stores) stores\(replace ? ", \(result.removed) removed" : "") · catalog version \(result.catalogVersion)\n")
            }
        }
        reader = try LineReader(path: path)
        defer { reader.close() }
        do {
            while let (line, _) = try reader.next() {
                guard case .record(let r) = try CatalogFile.parse(line) else { continue }
                chunk.append(NumberedRecord(line: UInt32(clamping: reader.lineNumber), record: r))
                if chunk.count == chunkRecords { try send(commit: false) }
            }
            try send(commit: true)
        } catch let error as GroserError {
            progress.finish()
            if importID != 0, error.status?.code != .invalidArgument {
                _ = try? client.importCatalog(ImportChunk(importID: importID, abort: true))
            }
            if case .server(let status) = error, status.code == .invalidArgument {
                // groserd names the line; say it the way pass 1 does.
                throw CatalogFileRefused(lines: ["\(path): \(status.message)"], status: status)
            }
            throw error
        }
    }

    /// Writes the catalog (or one store) in the canonical form, page by page.
    static func export(store: String, output: String?, _ ctx: Context) throws {
        let client = ctx.client()
        var text = CatalogFile.header + "\n"
        var count = 0
        var token = ""
        var fd: Int32 = 1
        if let output {
            fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw UsageError("cannot create \(output): \(Errno.current)") }
        }
        defer { if output != nil { _ = close(fd) } }
        func flush() throws {
            guard !text.isEmpty else { return }
            var bytes = Array(text.utf8)
            text = ""
            var offset = 0
            while offset < bytes.count {
                let n = try syscall { bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) } }
                offset += n
            }
        }
        repeat {
            let page = try client.exportPage(ExportPageRequest(storeUID: store, pageSize: 5000, pageToken: token), timeout: 60)
            for r in page.records {
                text += CatalogFile.canonical(r) + "\n"
                count += 1
            }
            try flush()
            token = page.nextPageToken
        } while !token.isEmpty
        text = CatalogFile.end(records: count) + "\n"
        try flush()
    }
}

extension CatalogFileRefused {
    init(lines: [String], status: Status) { self.lines = lines }
}

/// A progress bar on standard error (a terminal only): records, rate, time left.
final class Progress {
    private let total: Int
    private let enabled: Bool
    private let started = monotonicNanoseconds()
    private var lastDrawn: UInt64 = 0

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled
    }

    func update(_ done: Int) {
        guard enabled else { return }
        let now = monotonicNanoseconds()
        guard now &- lastDrawn > 100_000_000 || done == total else { return }
        lastDrawn = now
        let seconds = Double(now - started) / 1e9
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let left = rate > 0 ? Double(total - done) / rate : 0
        let width = 30
        let filled = total > 0 ? min(width, width * done / total) : width
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        StandardStreams.err("\r\(bar) \(done)/\(total) records · \(Int(rate))/s · \(Int(left.rounded())) s left ")
    }

    func finish() {
        if enabled { StandardStreams.err("\n") }
    }
}
