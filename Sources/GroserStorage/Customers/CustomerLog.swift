#if canImport(Glibc)
import Glibc
#endif
import GroserSystem
import Synchronization

/// One shard's durable customer state: a snapshot plus the log segments
/// written since, in one directory.
///
///     snapshot-00000007   every session as of the start of log-00000007
///     log-00000007        records appended since, in order
///     log-00000008        the active segment (appends go here)
///
/// A record is framed as `length u32, crc32c u32, payload` (little-endian;
/// the CRC covers the payload). A batch of records is written with one
/// pwrite and made durable with one fdatasync before any of its answers
/// leaves. The shard's thread appends and rotates; a compaction folds the
/// snapshot and the sealed segments into a new snapshot from the files
/// alone, so it never pauses the shard.
public final class CustomerLog: @unchecked Sendable {
    // @unchecked: `active` and `encodeBuffer` belong to the shard's thread
    // (append, rotate); `compact` only reads sealed files and `activeNumber`.
    public let directory: String
    public let segmentBytes: Int
    // Not checked for exclusivity at run time: the shard's thread only
    // (a checked access cost about 80 instructions, twice a batch).
    @exclusivity(unchecked) private var active: LogFile?
    private let activeNumber = Atomic<Int>(0)
    @exclusivity(unchecked) private var encodeBuffer: [UInt8] = []
    /// Serialises compactions (one folder, one compactor at a time).
    private let compacting = Locked(())

    /// The longest record the log accepts (a cart of 200 lines with its
    /// answer is ~40 KiB).
    static let maximumRecordBytes = 16 << 20
    static let headerBytes = 8
    /// Zeros kept ahead of the active segment's data (LogFile).
    let preallocateBytes: Int

    public struct Recovery: Sendable, Hashable {
        public var records = 0
        public var snapshotRecords = 0
        public var segments = 0
        /// A torn last record (a crash mid-append) that was cut off.
        public var droppedTail: TornTail?
        public struct TornTail: Sendable, Hashable { public var file: String; public var offset: Int; public var bytes: Int }
    }

    public init(directory: String, segmentBytes: Int = 64 << 20) {
        self.directory = directory
        self.segmentBytes = segmentBytes
        preallocateBytes = min(1 << 20, max(segmentBytes, 4096))
    }

    static func snapshotName(_ n: Int) -> String { "snapshot-" + padded(n) }
    static func segmentName(_ n: Int) -> String { "log-" + padded(n) }
    private static func padded(_ n: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, 8 - s.count)) + s
    }

    private struct Listing {
        var snapshot: Int?
        var segments: [Int] = []
        var leftovers: [String] = []
    }

    private func list() throws(StorageError) -> Listing {
        let names: [String]
        do { names = try LogFile.names(in: directory) } catch {
            throw StorageError("cannot list the customer log \(directory): \(error)")
        }
        var l = Listing()
        for name in names {
            if name.hasPrefix("snapshot-"), let n = Int(name.dropFirst(9)), name.count == 17 {
                l.snapshot = max(l.snapshot ?? n, n)
            } else if name.hasPrefix("log-"), let n = Int(name.dropFirst(4)), name.count == 12 {
                l.segments.append(n)
            } else if name.hasSuffix(".tmp") {
                l.leftovers.append(name)
            }
        }
        l.segments.sort()
        return l
    }

    /// Rebuilds `state` from the snapshot and the segments after it, cuts a
    /// torn last record off the last segment, and opens the active segment.
    /// A damaged record anywhere else refuses, naming the file and offset.
    public func recover(into state: inout CustomerState) throws(StorageError) -> Recovery {
        do { try Files.makeDirectories(directory, mode: 0o700) } catch {
            throw StorageError("cannot create the customer log \(directory): \(error)")
        }
        var listing = try list()
        // Leftovers of an interrupted compaction, and what a finished one
        // had not yet removed.
        for name in listing.leftovers { try? Files.remove(directory + "/" + name) }
        let base = listing.snapshot ?? 0
        for n in listing.segments where n < base { try? Files.remove(directory + "/" + Self.segmentName(n)) }
        if let names = try? LogFile.names(in: directory) {
            for name in names where name.hasPrefix("snapshot-") && name != Self.snapshotName(base) {
                try? Files.remove(directory + "/" + name)
            }
        }
        listing.segments.removeAll { $0 < base }
        var report = Recovery()
        if let s = listing.snapshot {
            let path = directory + "/" + Self.snapshotName(s)
            report.snapshotRecords = try Self.read(path, isLast: false) { state.apply($0) }.records
        }
        let last = listing.segments.last
        var lastEnd: Int?
        for n in listing.segments {
            let path = directory + "/" + Self.segmentName(n)
            let r = try Self.read(path, isLast: n == last) { state.apply($0) }
            report.records += r.records
            report.segments += 1
            lastEnd = r.end
            if let cut = r.tornAt {
                do {
                    let f = try LogFile(path: path)
                    try f.truncate(to: cut)
                } catch {
                    throw StorageError("cannot cut the torn last record off \(path): \(error)")
                }
                report.droppedTail = .init(file: path, offset: cut, bytes: r.tornBytes)
                lastEnd = cut
            }
        }
        let number = last ?? base
        try open(number, dataEnd: last == nil ? nil : lastEnd)
        return report
    }

    /// What the log in `directory` holds, read without changing anything
    /// (a torn tail is skipped, not cut): for tools and tests.
    public static func read(directory: String, into state: inout CustomerState) throws(StorageError) {
        let listing = try CustomerLog(directory: directory).list()
        let base = listing.snapshot ?? 0
        if let s = listing.snapshot { _ = try read(directory + "/" + snapshotName(s), isLast: false) { state.apply($0) } }
        let segments = listing.segments.filter { $0 >= base }
        for n in segments {
            _ = try read(directory + "/" + segmentName(n), isLast: n == segments.last) { state.apply($0) }
        }
    }

    private func open(_ number: Int, dataEnd: Int? = nil) throws(StorageError) {
        let path = directory + "/" + Self.segmentName(number)
        do {
            active = try LogFile(path: path, dataEnd: dataEnd, preallocateBytes: preallocateBytes)
            try LogFile.syncDirectory(directory)
        } catch {
            throw StorageError("cannot open the customer log segment \(path): \(error)")
        }
        activeNumber.store(number, ordering: .releasing)
    }

    struct ReadResult {
        var records = 0
        /// Where the records end (zeros, if any, follow to the end of the file).
        var end = 0
        /// Where a torn tail starts (last segment only), and its bytes up to
        /// the last one that is not zero.
        var tornAt: Int?
        var tornBytes = 0
    }

    /// Reads every record of the file at `path`. Zeros to the end of the
    /// file end the data (space written ahead, LogFile). In the last segment
    /// a record that runs past the end of the file, or whose checksum fails
    /// with only zeros after it, is a torn append; anything else that fails
    /// is damage.
    static func read(_ path: String, isLast: Bool, _ visit: (CustomerRecord) -> Void) throws(StorageError) -> ReadResult {
        let bytes: [UInt8]
        do {
            guard let b = try Files.read(path) else { return ReadResult() }
            bytes = b
        } catch {
            throw StorageError("cannot read the customer log \(path): \(error)")
        }
        var result = ReadResult()
        var failure: StorageError?
        bytes.withUnsafeBytes { (p: UnsafeRawBufferPointer) in
            var at = 0
            while at < p.count {
                switch frame(p, at) {
                case .record(let payload, let next):
                    guard let record = CustomerRecordCodec.decode(payload) else {
                        if let kind = payload.first, kind > CustomerRecordCodec.newestKind {
                            failure = StorageError("the customer log \(path) holds at byte \(at) a record of kind \(kind), which this groserd does not know: a newer groserd wrote it. Run that version; `groserd --repair` of this one would cut the log there and lose every record after it")
                        } else {
                            failure = damage(path, at, "the record's checksum is good but it is not a customer record")
                        }
                        return
                    }
                    visit(record)
                    result.records += 1
                    at = next
                    result.end = at
                case .end:
                    return
                case .torn:
                    if isLast {
                        result.tornAt = at
                        let lastNonZero = p.lastIndex { $0 != 0 } ?? at
                        result.tornBytes = max(0, lastNonZero + 1 - at)
                    } else {
                        failure = damage(path, at, "the record is cut short, and this is not the last segment")
                    }
                    return
                case .bad(let why):
                    failure = damage(path, at, why)
                    return
                }
            }
        }
        if let failure { throw failure }
        return result
    }

    enum Frame {
        case record(UnsafeRawBufferPointer, next: Int)
        /// Only zeros from here to the end of the file.
        case end
        case torn
        case bad(String)
    }

    static func frame(_ p: UnsafeRawBufferPointer, _ at: Int) -> Frame {
        let remaining = p.count - at
        if remaining < headerBytes { return p[at...].allSatisfy { $0 == 0 } ? .end : .torn }
        let length = Int(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
        let crc = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self))
        if length == 0 && p[at...].allSatisfy({ $0 == 0 }) { return .end }
        if length == 0 || length > maximumRecordBytes {
            return .bad("the record's length \(length) is impossible")
        }
        let end = at + headerBytes + length
        if end > p.count { return .torn }
        let payload = UnsafeRawBufferPointer(rebasing: p[(at + headerBytes)..<end])
        guard CRC32C.checksum(payload) == crc else {
            // The last record, damaged: an append torn by a crash (nothing
            // but the zeros written ahead after it).
            if p[end...].allSatisfy({ $0 == 0 }) { return .torn }
            return .bad("the record's checksum does not match")
        }
        return .record(payload, next: end)
    }

    private static func damage(_ path: String, _ offset: Int, _ why: String) -> StorageError {
        StorageError("the customer log \(path) is damaged at byte \(offset): \(why); nothing after it can be trusted. Run `groserd --repair` to cut the log at the last good record (what is cut is lost), or restore the data directory from a backup")
    }

    /// Appends `records` as one write and fdatasyncs: when it returns they
    /// survive a crash. On failure (a full disk) nothing of them stays in
    /// the file and the log remains usable.
    public func append(_ records: [CustomerRecord]) throws(StorageError) {
        guard let active else { throw StorageError("the customer log is not open") }
        encodeBuffer.removeAll(keepingCapacity: encodeBuffer.capacity <= 1 << 20)
        for r in records { Self.appendFrame(r, to: &encodeBuffer) }
        do { try active.appendDurably(encodeBuffer) } catch {
            throw StorageError("cannot write the customer log \(active.path): \(error)")
        }
    }

    static func appendFrame(_ record: CustomerRecord, to out: inout [UInt8]) {
        let start = out.count
        // The header (length, CRC) is measured with the payload and
        // written last, in place: one growth of `out` per record.
        var size = CustomerRecordCodec.Measure()
        CustomerRecordCodec.encode(record, &size)
        let length = size.count
        out.append(contentsOf: repeatElement(0, count: headerBytes + length))
        out.withUnsafeMutableBytes { raw in
            let frame = raw.baseAddress! + start
            var w = CustomerRecordCodec.Write(base: frame + headerBytes)
            CustomerRecordCodec.encode(record, &w)
            precondition(w.at == length, "CustomerRecordCodec: \(w.at) bytes written, \(length) measured")
            let crc = CRC32C.checksum(UnsafeRawBufferPointer(start: frame + headerBytes, count: length))
            frame.storeBytes(of: UInt32(length).littleEndian, as: UInt32.self)
            frame.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
        }
    }

    /// Bytes in the active segment.
    public var activeBytes: Int { active?.size ?? 0 }

    /// True when the active segment has grown past `segmentBytes`.
    public var wantsRotation: Bool { activeBytes >= segmentBytes }

    /// Seals the active segment and starts the next one.
    public func rotate() throws(StorageError) {
        try open(activeNumber.load(ordering: .acquiring) + 1)
    }

    /// The number of segment files a compaction would fold (all but the active one).
    public var sealedSegments: Int {
        guard let l = try? list() else { return 0 }
        return l.segments.filter { $0 < activeNumber.load(ordering: .acquiring) }.count
    }

    /// Folds the snapshot and every sealed segment into a new snapshot,
    /// written beside them (temporary name, fsync, rename, directory fsync),
    /// then removes what it replaces. Reads files only: safe on another
    /// thread while the shard appends. `expire` drops what has expired.
    public func compact(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int {
        try compacting.withLock { (_) throws(StorageError) -> Int in
            let upTo = activeNumber.load(ordering: .acquiring)
            let listing = try list()
            let sealed = listing.segments.filter { $0 < upTo && $0 >= (listing.snapshot ?? 0) }
            guard !sealed.isEmpty else { return 0 }
            var state = CustomerState()
            if let s = listing.snapshot {
                _ = try Self.read(directory + "/" + Self.snapshotName(s), isLast: false) { state.apply($0) }
            }
            for n in sealed {
                _ = try Self.read(directory + "/" + Self.segmentName(n), isLast: false) { state.apply($0) }
            }
            expire(&state)
            let name = Self.snapshotName(upTo)
            let tmp = directory + "/" + name + ".tmp"
            do {
                let file = try LogFile(path: tmp)
                try file.truncate(to: 0)
                var buffer: [UInt8] = []
                var failure: Errno?
                state.forEachRecord { record in
                    guard failure == nil else { return }
                    Self.appendFrame(record, to: &buffer)
                    if buffer.count >= 1 << 20 {
                        do { try file.appendDurably(buffer) } catch let e as Errno { failure = e } catch { failure = Errno(rawValue: EIO) }
                        buffer.removeAll(keepingCapacity: true)
                    }
                }
                if let failure { throw failure }
                try file.appendDurably(buffer)
                try LogFile.rename(tmp, to: directory + "/" + name)
                try LogFile.syncDirectory(directory)
            } catch {
                try? Files.remove(tmp)
                throw StorageError("cannot write the customer snapshot \(tmp): \(error)")
            }
            if let s = listing.snapshot { try? Files.remove(directory + "/" + Self.snapshotName(s)) }
            for n in sealed { try? Files.remove(directory + "/" + Self.segmentName(n)) }
            return state.sessions.count
        }
    }

    /// `groserd --repair`: cuts every file of the log at its first damaged
    /// record. Returns one line per file cut (empty when nothing was damaged).
    public static func repair(directory: String) throws(StorageError) -> [String] {
        let log = CustomerLog(directory: directory)
        let listing = try log.list()
        var files: [String] = []
        if let s = listing.snapshot { files.append(snapshotName(s)) }
        files += listing.segments.filter { $0 >= (listing.snapshot ?? 0) }.map(segmentName)
        var lines: [String] = []
        for name in files {
            let path = directory + "/" + name
            let bytes: [UInt8]
            do { bytes = try Files.read(path) ?? [] } catch {
                throw StorageError("cannot read \(path): \(error)")
            }
            var at = 0
            var records = 0
            var problem: String?
            bytes.withUnsafeBytes { p in
                while at < p.count {
                    switch frame(p, at) {
                    case .record(let payload, let next):
                        guard CustomerRecordCodec.decode(payload) != nil else { problem = "not a customer record"; return }
                        records += 1
                        at = next
                    case .end: return
                    case .torn: problem = "cut short"; return
                    case .bad(let why): problem = why; return
                    }
                }
            }
            guard let problem else { continue }
            do { try LogFile(path: path).truncate(to: at) } catch {
                throw StorageError("cannot cut \(path) at byte \(at): \(error)")
            }
            lines.append("\(path): cut at byte \(at) (\(problem)); kept \(records) record(s), dropped \(bytes.count - at) byte(s)")
        }
        return lines
    }
}
