import GroserStorage
import GroserSystem
import GroserWire

/// Catalog import and export (ImportCatalog, ExportCatalog) on a thread of
/// their own, off the commit thread: staging a record, applying an import
/// and encoding the new catalog never hold up cart writes, which go on
/// against the live database until the import's one transaction commits.
final class ImportService: Sendable {
    private let queue = BlockingQueue<CommerceJob>()
    private let store: any CatalogImporting
    private let catalog: CatalogService
    private let isOperator: @Sendable (Caller) -> Bool
    private let logger: Logger
    private let thread = ImportThreadBox()
    private let imports = Locked<[UInt64: OpenImport]>([:])
    private let nextID = Locked<UInt64>(0)

    /// Imports open at once; the next begins with RESOURCE_EXHAUSTED.
    static let maximumOpenImports = 4
    /// An import with no request for this long is dropped.
    static let idleNanoseconds: UInt64 = 600 * 1_000_000_000
    static let defaultExportPage = 1000
    static let maximumExportPage = 10_000

    private final class OpenImport: @unchecked Sendable {
        // @unchecked: used only on the import thread.
        let staging: any CatalogImportSession
        let owner: UInt32?
        var lastUsed: UInt64
        init(_ staging: any CatalogImportSession, owner: UInt32?) {
            self.staging = staging
            self.owner = owner
            lastUsed = monotonicNanoseconds()
        }
    }

    init(store: any CatalogImporting, catalog: CatalogService, isOperator: @escaping @Sendable (Caller) -> Bool, logger: Logger) {
        self.store = store
        self.catalog = catalog
        self.isOperator = isOperator
        self.logger = logger
    }

    func start() throws(Errno) {
        thread.set(try OSThread(name: "groserd-import") { [self] in
            OSThread.runInBackground()
            run()
        })
    }

    func submit(_ job: CommerceJob) -> Bool { queue.put(job) }

    func stop() {
        queue.close()
        thread.join()
        for (_, open) in imports.withLock({ $0 }) { open.staging.discard() }
    }

    private func run() {
        while true {
            let batch = queue.take(upTo: 16)
            if batch.isEmpty { return }
            for job in batch where job.connection?.isClosed != true {
                var frame: [UInt8] = []
                if let refusal = Dispatcher.deadlineRefusal(job.request, receivedAt: job.receivedAt) {
                    ResponseFrameWriter.appendStatus(id: job.request.id, status: refusal, to: &frame)
                    job.reply(frame)
                    continue
                }
                let outcome: CommerceOutcome
                do {
                    outcome = try answer(job)
                } catch let refusal as Refusal {
                    outcome = .failed(refusal.status)
                } catch {
                    outcome = .failed(Status(.internal, "Unexpected error: \(error)."))
                }
                switch outcome {
                case .ok(let field, let body): ResponseFrameWriter.appendOK(id: job.request.id, field: field, body: body, to: &frame)
                case .failed(let status): ResponseFrameWriter.appendStatus(id: job.request.id, status: status, to: &frame)
                }
                job.reply(frame)
            }
            dropIdle()
        }
    }

    private func answer(_ job: CommerceJob) throws -> CommerceOutcome {
        guard isOperator(job.caller) else {
            throw Refusal(.permissionDenied, "Only groserd's own user, root or an admin group member may import or export the catalog.")
        }
        switch job.request.method {
        case .importCatalog(let chunk): return try importChunk(chunk, caller: job.caller)
        case .exportCatalog(let page): return try export(page)
        default: throw Refusal(.unimplemented, "The import service does not answer this method.")
        }
    }

    // MARK: Import

    private func importChunk(_ chunk: ImportChunk, caller: Caller) throws -> CommerceOutcome {
        let open: OpenImport
        if chunk.importID == 0 {
            guard imports.withLock({ $0.count }) < Self.maximumOpenImports else {
                throw Refusal(.resourceExhausted, "\(Self.maximumOpenImports) imports are open; finish or abort one first.")
            }
            let id = nextID.withLock { $0 += 1; return $0 }
            do {
                open = OpenImport(try store.beginImport(id: id, replace: chunk.replace), owner: caller.uid)
            } catch {
                throw Refusal(.unavailable, "The import could not start: \(error).")
            }
            imports.withLock { $0[id] = open }
            logger.info("import \(id) begun\(chunk.replace ? " (replace)" : "") by uid \(caller.uid ?? 0)")
        } else {
            guard let found = imports.withLock({ $0[chunk.importID] }), found.owner == caller.uid else {
                throw Refusal(.notFound, "No import \(chunk.importID) is open (it may have ended with an error, been aborted, or been idle for 10 minutes); begin again with import_id 0.")
            }
            open = found
        }
        open.lastUsed = monotonicNanoseconds()
        let id = open.staging.id
        if chunk.abort {
            close(id)
            logger.info("import \(id) aborted after \(open.staging.records) records")
            return .ok(.importCatalog, BodyEncoder.importCatalog(ImportResult(importID: id, records: open.staging.records)))
        }
        // The records before the first that breaks a value rule are staged
        // at once (one round trip to PostgreSQL); a problem the store finds
        // among them is earlier in the file, so it is the one reported.
        let broken = chunk.records.firstIndex { CatalogRecordRules.problem($0.record) != nil }
        var problem: ImportProblem?
        do { try open.staging.add(Array(chunk.records[..<(broken ?? chunk.records.endIndex)])) } catch { problem = error }
        if problem == nil, let broken, let reason = CatalogRecordRules.problem(chunk.records[broken].record) {
            problem = ImportProblem(line: chunk.records[broken].line, reason)
        }
        if let problem {
            close(id)
            logger.info("import \(id) refused: \(problem)")
            throw Refusal(.invalidArgument, "The import was refused, and nothing of it applied: \(problem).")
        }
        guard chunk.commit else {
            return .ok(.importCatalog, BodyEncoder.importCatalog(ImportResult(importID: id, records: open.staging.records)))
        }
        let started = monotonicNanoseconds()
        let summary: ImportSummary
        do {
            summary = try catalog.reload { () throws(StorageError) -> ImportSummary in
                do { return try open.staging.commit() } catch {
                    throw StorageError("\(error)")
                }
            }
        } catch {
            close(id)
            throw Refusal(.invalidArgument, "The import was refused, and nothing of it applied: \(error).")
        }
        close(id)
        logger.info("import \(id) committed: \(summary.products) products in \(summary.stores) stores, \(summary.removed) removed, catalog version \(summary.catalogVersion), \((monotonicNanoseconds() - started) / 1_000_000) ms")
        return .ok(.importCatalog, BodyEncoder.importCatalog(ImportResult(
            importID: id, records: open.staging.records, committed: true, catalogVersion: summary.catalogVersion,
            stores: UInt32(clamping: summary.stores), products: UInt32(clamping: summary.products),
            removed: UInt32(clamping: summary.removed))))
    }

    private func close(_ id: UInt64) {
        if let open = imports.withLock({ $0.removeValue(forKey: id) }) { open.staging.discard() }
    }

    private func dropIdle() {
        let now = monotonicNanoseconds()
        let idle = imports.withLock { $0.filter { now &- $0.value.lastUsed > Self.idleNanoseconds }.map(\.key) }
        for id in idle {
            logger.info("import \(id) dropped after 10 minutes without a request")
            close(id)
        }
    }

    // MARK: Export

    private func export(_ request: ExportPageRequest) throws -> CommerceOutcome {
        let size = request.pageSize == 0 ? Self.defaultExportPage : min(Int(request.pageSize), Self.maximumExportPage)
        var cursor: ExportCursor?
        if !request.pageToken.isEmpty {
            let parts = request.pageToken.split(separator: ".")
            guard parts.count == 3, parts[0] == "e1", let v = UInt64(parts[1]), let r = Int(parts[2]), r >= 0 else {
                throw Refusal(.invalidArgument, "The page token is not one this groserd gave out; start again with an empty page_token.")
            }
            cursor = ExportCursor(version: v, record: r)
        }
        let page: (records: [CatalogRecord], next: ExportCursor?, version: UInt64)
        do {
            page = try store.exportPage(storeUID: request.storeUID, from: cursor, limit: size)
        } catch {
            let text = error.description
            throw Refusal(text.contains("no store") ? .notFound : .failedPrecondition, text.prefix(1).uppercased() + text.dropFirst() + ".")
        }
        let token = page.next.map { "e1.\($0.version).\($0.record)" } ?? ""
        return .ok(.exportCatalog, BodyEncoder.exportCatalog(ExportPage(records: page.records, nextPageToken: token, catalogVersion: page.version)))
    }
}

/// Holds the import thread once started.
private final class ImportThreadBox: @unchecked Sendable {
    // @unchecked: set once by `start` before any `join`, on the same thread.
    private var thread: OSThread?
    func set(_ t: OSThread) { thread = t }
    func join() { thread?.join(); thread = nil }
}
