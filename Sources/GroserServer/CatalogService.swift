import GroserStorage
import GroserSystem

/// The catalog every loop serves from: the current `EncodedCatalog`, swapped
/// whole when the catalog version changes.
public final class CatalogService: Sendable {
    private let store: any CatalogStore
    private let imageBaseURL: String
    private let encoded: Locked<EncodedCatalog>
    /// When the daemon started, for ServerInfo's uptime.
    public let startedAt: UInt64

    public init(store: any CatalogStore, imageBaseURL: String) throws(StorageError) {
        self.store = store
        self.imageBaseURL = imageBaseURL
        self.startedAt = monotonicNanoseconds()
        let (catalog, version) = try store.loadCatalog()
        encoded = Locked(EncodedCatalog(catalog: catalog, version: version, imageBaseURL: imageBaseURL,
                                       serverVersion: ProtocolInfo.serverVersion))
    }

    /// The catalog to answer from now.
    public var current: EncodedCatalog { encoded.withLock { $0 } }

    /// Reloads and re-encodes the catalog when storage has a newer version.
    /// Returns true when it changed.
    @discardableResult
    public func refresh() throws(StorageError) -> Bool {
        let version = try store.catalogVersion()
        if version == current.version { return false }
        let (catalog, newVersion) = try store.loadCatalog()
        let next = EncodedCatalog(catalog: catalog, version: newVersion, imageBaseURL: imageBaseURL,
                                  serverVersion: ProtocolInfo.serverVersion)
        encoded.withLock { $0 = next }
        return true
    }
}
