/// The catalog file format's records (docs/CATALOG.md), as ImportCatalog and
/// ExportCatalog carry them.
public enum CatalogRecord: Sendable, Hashable {
    /// `stores` is not used: stores name their city.
    case city(City)
    case store(StoreSummary)
    case department(CatalogDepartment)
    case shelf(CatalogShelf)
    case product(CatalogProduct)
}

/// A department and the store it belongs to.
public struct CatalogDepartment: Sendable, Hashable {
    public var uid: String
    public var storeUID: String
    public var name: String
    public init(uid: String, storeUID: String, name: String) {
        self.uid = uid
        self.storeUID = storeUID
        self.name = name
    }
}

/// A shelf and the department it belongs to.
public struct CatalogShelf: Sendable, Hashable {
    public var uid: String
    public var departmentUID: String
    public var name: String
    public init(uid: String, departmentUID: String, name: String) {
        self.uid = uid
        self.departmentUID = departmentUID
        self.name = name
    }
}

/// A product as an operator's catalog holds it: with its stock and barcode
/// (`product.outOfStock` is derived from the stock).
public struct CatalogProduct: Sendable, Hashable {
    public var product: Product
    public var stock: UInt32
    public var barcode: String
    public init(product: Product, stock: UInt32, barcode: String = "") {
        self.product = product
        self.stock = stock
        self.barcode = barcode
    }
}

/// A record and its line in the file (0: none).
public struct NumberedRecord: Sendable, Hashable {
    public var line: UInt32
    public var record: CatalogRecord
    public init(line: UInt32, record: CatalogRecord) {
        self.line = line
        self.record = record
    }
}

/// One request of an import (ImportCatalog).
public struct ImportChunk: Sendable, Hashable {
    /// 0 for the first request of an import.
    public var importID: UInt64
    public var records: [NumberedRecord]
    public var replace: Bool
    public var commit: Bool
    public var abort: Bool
    public init(importID: UInt64, records: [NumberedRecord] = [], replace: Bool = false, commit: Bool = false, abort: Bool = false) {
        self.importID = importID
        self.records = records
        self.replace = replace
        self.commit = commit
        self.abort = abort
    }
}

/// ImportCatalog's answer.
public struct ImportResult: Sendable, Hashable {
    public var importID: UInt64
    public var records: UInt64
    public var committed: Bool
    public var catalogVersion: UInt64
    public var stores: UInt32
    public var products: UInt32
    public var removed: UInt32
    public init(importID: UInt64, records: UInt64, committed: Bool = false, catalogVersion: UInt64 = 0,
                stores: UInt32 = 0, products: UInt32 = 0, removed: UInt32 = 0) {
        self.importID = importID
        self.records = records
        self.committed = committed
        self.catalogVersion = catalogVersion
        self.stores = stores
        self.products = products
        self.removed = removed
    }
}

/// ExportCatalog's request.
public struct ExportPageRequest: Sendable, Hashable {
    /// Empty: every store.
    public var storeUID: String
    public var pageSize: UInt32
    public var pageToken: String
    public init(storeUID: String = "", pageSize: UInt32 = 0, pageToken: String = "") {
        self.storeUID = storeUID
        self.pageSize = pageSize
        self.pageToken = pageToken
    }
}

/// ExportCatalog's answer.
public struct ExportPage: Sendable, Hashable {
    public var records: [CatalogRecord]
    public var nextPageToken: String
    public var catalogVersion: UInt64
    public init(records: [CatalogRecord], nextPageToken: String, catalogVersion: UInt64) {
        self.records = records
        self.nextPageToken = nextPageToken
        self.catalogVersion = catalogVersion
    }
}
