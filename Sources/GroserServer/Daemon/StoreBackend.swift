import GroserStorage
import GroserSystem

/// Where groserd keeps its data, chosen once from the configuration:
/// SQLite files in the data directory, or a PostgreSQL database that
/// several groserd share (`--store`). It opens the catalog's store and
/// makes the customer shards over the same backend, so the rest of the
/// daemon does not ask which one it is.
struct StoreBackend {
    /// What Stats says of the store (its kind, state and round trips).
    let health: StoreHealth
    /// The catalog, orders and catalog changes (SetProduct).
    let store: any CatalogStore & CommerceStore & CatalogImporting
    /// The customer shards over this backend.
    let makeCustomers: (CustomerService.Options, CatalogService, Logger) throws(StorageError) -> CustomerService

    /// Opens the store `config` names, logging where the data is.
    static func open(_ config: ServerConfig, logger: Logger) throws(StorageError) -> StoreBackend {
        guard let conninfo = config.postgres else { return try sqlite(config, logger: logger) }
        return try postgresql(conninfo, config, logger: logger)
    }

    /// One groserd's files: the catalog's database, a log per customer shard.
    private static func sqlite(_ config: ServerConfig, logger: Logger) throws(StorageError) -> StoreBackend {
        let store = try SQLiteCatalogStore(directory: config.dataDirectory, seedSampleCatalog: config.seedSampleCatalog)
        logger.info("data in \(store.path)")
        return StoreBackend(health: StoreHealth(.sqlite), store: store) { (options, catalog, logger) throws(StorageError) in
            try CustomerService(options, catalog: catalog, orders: store, logger: logger)
        }
    }

    /// Several groserd share the database: catalog, carts and orders there.
    private static func postgresql(_ conninfo: String, _ config: ServerConfig, logger: Logger) throws(StorageError) -> StoreBackend {
        let health = StoreHealth(.postgresql)
        let store = try PostgresCatalogStore(conninfo: conninfo, seedSampleCatalog: config.seedSampleCatalog, health: health)
        logger.info("data in PostgreSQL (\(PostgresCustomerStore.describe(conninfo)))")
        return StoreBackend(health: health, store: store) { (options, catalog, logger) throws(StorageError) in
            try CustomerService(sharedStore: conninfo, options, catalog: catalog, orders: store,
                                products: { (uid) throws(StorageError) in try store.productFacts(uid) }, logger: logger,
                                health: health)
        }
    }
}
