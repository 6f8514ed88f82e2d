import GroserWire

/// Watch and CancelWatch over one connection's watches: functions of the
/// request, the catalog, the hub's history and the connection's watchers,
/// appending the answer frames. The event loop and the fuzz harness both
/// answer through them.
public enum WatchRequests {
    /// The most watches one connection may hold.
    static let maximumWatchesPerConnection = 64

    /// Answers a Watch: its first frame (continues set), or a refusal.
    /// Returns true when the watch started (it was appended to `watchers`).
    public static func start(id: UInt64, selector: StoreSelector?, since: UInt64, catalog: EncodedCatalog, hub: WatchHub,
                      watchers: inout [Watcher], into out: inout [UInt8]) -> Bool {
        func fail(_ code: StatusCode, _ message: String) -> Bool {
            ResponseFrameWriter.appendStatus(id: id, status: Status(code, message), to: &out)
            return false
        }
        let storeUID: String
        switch selector {
        case nil:
            return fail(.invalidArgument, "Watch needs one of city_code, city_uid or store_uid.")
        case .cityCode(let code):
            guard !code.isEmpty else { return fail(.invalidArgument, "Watch's city_code is empty.") }
            guard let uid = catalog.defaultStoreByCityCode[code.uppercased()] else {
                return fail(.notFound, "No city has the code \"\(RequestHandler.printable(code))\"; ListCities lists the codes.")
            }
            storeUID = uid
        case .cityUID(let cityUID):
            guard !cityUID.isEmpty else { return fail(.invalidArgument, "Watch's city_uid is empty.") }
            guard let uid = catalog.defaultStoreByCityUID[cityUID] else {
                return fail(.notFound, "No city has the uid \"\(RequestHandler.printable(cityUID))\".")
            }
            storeUID = uid
        case .storeUID(let uid):
            guard !uid.isEmpty else { return fail(.invalidArgument, "Watch's store_uid is empty.") }
            storeUID = uid
        }
        guard catalog.stores[storeUID] != nil, let (version, catchUp) = hub.start(store: storeUID, since: since) else {
            return fail(.notFound, "No store has the uid \"\(RequestHandler.printable(storeUID))\".")
        }
        guard !watchers.contains(where: { $0.id == id }) else {
            return fail(.alreadyExists, "A watch with id \(id) is already open on this connection; each watch needs its own request id.")
        }
        guard watchers.count < maximumWatchesPerConnection else {
            return fail(.resourceExhausted, "This connection has \(maximumWatchesPerConnection) watches open, the most one connection may hold.")
        }
        var event = WatchEvent(storeUID: storeUID, storeVersion: version, previousVersion: since,
                               catalogVersion: catalog.version, initial: true)
        switch catchUp {
        case .upToDate: break
        case .reload: event.reload = true
        case .changes(let shelves, let products):
            event.shelfUIDs = shelves
            event.products = products
        }
        BodyEncoder.watchEvent(event).withUnsafeBytes { body in
            ResponseFrameWriter.appendStreamFrame(id: id, field: .watch, body: body, continues: true, to: &out)
        }
        watchers.append(Watcher(id: id, storeUID: storeUID, version: version))
        return true
    }

    /// Answers a CancelWatch: the watch's last frame (CANCELLED, continues
    /// unset) into `streamEnd`, then the OK answer into `out`; or NOT_FOUND.
    /// Returns the watch it removed.
    public static func cancel(id: UInt64, watchID: UInt64, watchers: inout [Watcher], streamEnd: inout [UInt8],
                       into out: inout [UInt8]) -> Watcher? {
        guard let i = watchers.firstIndex(where: { $0.id == watchID }) else {
            ResponseFrameWriter.appendStatus(
                id: id, status: Status(.notFound, "No watch with id \(watchID) is open on this connection."), to: &out)
            return nil
        }
        ResponseFrameWriter.appendStatus(id: watchID, status: Status(.cancelled, "The watch was cancelled."), to: &streamEnd)
        ResponseFrameWriter.appendOK(id: id, field: .cancelWatch, body: [], to: &out)
        return watchers.remove(at: i)
    }
}
