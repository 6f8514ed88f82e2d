import GroserSystem
import GroserWire

/// Turns request frames into response frames: a function of (request,
/// state) with no I/O, so tests call it directly and the socket layer only
/// moves bytes.
public struct RequestHandler: Sendable {
    let catalog: EncodedCatalog
    let startedAtNanoseconds: UInt64

    public init(catalog: EncodedCatalog, startedAtNanoseconds: UInt64) {
        self.catalog = catalog
        self.startedAtNanoseconds = startedAtNanoseconds
    }

    /// What became of a request.
    public enum Handled: Sendable {
        /// A response frame was appended.
        case answered
        /// The request needs the store: it goes to the commit queue, and its
        /// response comes later.
        case deferred(Request)
    }

    /// Answers one frame body, appending one whole response frame to `out`,
    /// or hands it back as deferred.
    public func respond(toFrame body: UnsafeRawBufferPointer, receivedAt: UInt64, into out: inout [UInt8]) -> Handled {
        let request: Request
        do {
            request = try Request.decode(body)
        } catch {
            // Refused unread, like a malformed frame: id 0 (PROTOCOL.md §2, §11).
            let message = error.tooManyFields
                ? "The request has more than \(Request.maximumFieldCount) fields (unknown and repeated ones count); groserd does not read it."
                : "The frame is not a valid groser.v1.Request message."
            ResponseFrameWriter.appendStatus(id: 0, status: Status(.invalidArgument, message), to: &out)
            return .answered
        }
        return respond(to: request, receivedAt: receivedAt, into: &out)
    }

    /// True when a request's deadline passed; then its answer is appended.
    public static func expired(_ request: Request, receivedAt: UInt64, into out: inout [UInt8]) -> Bool {
        guard request.deadlineMilliseconds != 0 else { return false }
        let elapsed = monotonicNanoseconds() &- receivedAt
        guard elapsed > UInt64(request.deadlineMilliseconds) * 1_000_000 else { return false }
        ResponseFrameWriter.appendStatus(
            id: request.id,
            status: Status(.deadlineExceeded, "The request's deadline of \(request.deadlineMilliseconds) ms passed before it was served."),
            to: &out)
        return true
    }

    /// Answers one decoded request, or hands it back as deferred.
    public func respond(to request: Request, receivedAt: UInt64, into out: inout [UInt8]) -> Handled {
        if Self.expired(request, receivedAt: receivedAt, into: &out) { return .answered }
        if CommerceService.handles(request.method) { return .deferred(request) }
        answerCatalog(request, into: &out)
        return .answered
    }

    private func answerCatalog(_ request: Request, into out: inout [UInt8]) {
        switch request.method {
        case .serverInfo:
            let uptime = (monotonicNanoseconds() &- startedAtNanoseconds) / 1_000_000
            // Protobuf merges concatenated encodings, so the uptime field can
            // follow the body encoded once per catalog version (written
            // after it, not appended to a copy of it).
            catalog.serverInfoStaticBody.withUnsafeBytes { body in
                ResponseFrameWriter.appendOK(id: request.id, field: .serverInfo, body: body,
                                             appendingVarintField: 3, value: uptime, to: &out)
            }

        case .listCities:
            ResponseFrameWriter.appendOK(id: request.id, field: .listCities, body: catalog.listCitiesBody, to: &out)

        case .getStore(let selector, let includeProducts):
            let storeUID: String?
            switch selector {
            case nil:
                fail(request.id, .invalidArgument, "GetStore needs one of city_code, city_uid or store_uid.", &out)
                return
            case .cityCode(let code):
                guard !code.isEmpty else {
                    fail(request.id, .invalidArgument, "GetStore's city_code is empty.", &out)
                    return
                }
                storeUID = catalog.defaultStoreByCityCode[code.uppercased()]
                if storeUID == nil {
                    fail(request.id, .notFound, "No city has the code \"\(printable(code))\"; ListCities lists the codes.", &out)
                    return
                }
            case .cityUID(let uid):
                guard !uid.isEmpty else {
                    fail(request.id, .invalidArgument, "GetStore's city_uid is empty.", &out)
                    return
                }
                storeUID = catalog.defaultStoreByCityUID[uid]
                if storeUID == nil {
                    fail(request.id, .notFound, "No city has the uid \"\(printable(uid))\".", &out)
                    return
                }
            case .storeUID(let uid):
                guard !uid.isEmpty else {
                    fail(request.id, .invalidArgument, "GetStore's store_uid is empty.", &out)
                    return
                }
                storeUID = uid
            }
            guard let uid = storeUID, let bodies = catalog.storeBodies[uid] else {
                fail(request.id, .notFound, "No store has the uid \"\(printable(storeUID ?? ""))\".", &out)
                return
            }
            let body = includeProducts ? bodies.withProducts : bodies.summary
            ResponseFrameWriter.appendOK(id: request.id, field: .getStore, body: body, to: &out)

        case .getShelf(let uid):
            guard !uid.isEmpty else {
                fail(request.id, .invalidArgument, "GetShelf's shelf_uid is empty.", &out)
                return
            }
            guard let body = catalog.shelfBodies[uid] else {
                fail(request.id, .notFound, "No shelf has the uid \"\(printable(uid))\".", &out)
                return
            }
            ResponseFrameWriter.appendOK(id: request.id, field: .getShelf, body: body, to: &out)

        default:
            fail(request.id, .unimplemented, "The request carries no method this server knows (protocol v\(ProtocolInfo.version)).", &out)
        }
    }

    private func fail(_ id: UInt64, _ code: StatusCode, _ message: String, _ out: inout [UInt8]) {
        ResponseFrameWriter.appendStatus(id: id, status: Status(code, message), to: &out)
    }

    /// A client-supplied string cut to a length fit for one error sentence.
    private func printable(_ s: String) -> String {
        s.count <= 64 ? s : String(s.prefix(64)) + "…"
    }
}
