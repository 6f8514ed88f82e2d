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
        encoded = Locked(try Self.encode(store, imageBaseURL))
        Allocator.returnFreeMemory()
    }

    /// Loads and encodes the catalog; the decoded form is dropped on return.
    private static func encode(_ store: any CatalogStore, _ imageBaseURL: String) throws(StorageError) -> EncodedCatalog {
        let (catalog, version) = try store.loadCatalog()
        return EncodedCatalog(catalog: catalog, version: version, imageBaseURL: imageBaseURL,
                              serverVersion: ProtocolInfo.serverVersion)
    }

    /// The catalog to answer from now.
    public var current: EncodedCatalog { encoded.withLock { $0 } }

    /// Reloads and re-encodes the catalog when storage has a newer version.
    /// Returns true when it changed.
    @discardableResult
    public func refresh() throws(StorageError) -> Bool {
        let version = try store.catalogVersion()
        if version == current.version { return false }
        let next = try Self.encode(store, imageBaseURL)
        encoded.withLock { $0 = next }
        Allocator.returnFreeMemory()
        return true
    }
}
