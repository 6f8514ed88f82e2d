/// The field numbers of the catalog answers groserd writes itself from the
/// encoded catalog's segments rather than through protobuf-c (from
/// service.proto, catalog.proto and search.proto; `AnswerFieldsTests` checks
/// every one against the compiled-in descriptors).
enum AnswerField {
    enum ServerInfo { static let uptimeMS: UInt32 = 3, catalogVersion: UInt32 = 4 }
    enum ListCities { static let catalogVersion: UInt32 = 2 }
    enum GetStore {
        static let store: UInt32 = 1, city: UInt32 = 2, catalogVersion: UInt32 = 3, storeVersion: UInt32 = 4
        static let notModified: UInt32 = 5
    }
    enum GetShelf {
        static let shelf: UInt32 = 1, storeUID: UInt32 = 2, departmentUID: UInt32 = 3, catalogVersion: UInt32 = 4
        static let storeVersion: UInt32 = 5, notModified: UInt32 = 6
    }
    enum ListStores { static let stores: UInt32 = 1, cityUID: UInt32 = 2, catalogVersion: UInt32 = 3 }
    enum StoreListing { static let summary: UInt32 = 1, isDefault: UInt32 = 2, storeVersion: UInt32 = 3 }
    enum ListProducts {
        static let products: UInt32 = 1, nextPageToken: UInt32 = 2, storeVersion: UInt32 = 3, totalSize: UInt32 = 4
    }
    enum SearchProducts {
        static let hits: UInt32 = 1, totalEstimate: UInt32 = 2, nextPageToken: UInt32 = 3, queryUsed: UInt32 = 4
        static let layoutSwitched: UInt32 = 5, storeUID: UInt32 = 6, storeVersion: UInt32 = 7
    }
    enum SearchHit {
        static let product: UInt32 = 1, highlights: UInt32 = 2, matchedWords: UInt32 = 3, shelfName: UInt32 = 4
        static let departmentUID: UInt32 = 5, departmentName: UInt32 = 6
    }
    enum TextRange { static let start: UInt32 = 1, length: UInt32 = 2 }
    enum Store { static let summary: UInt32 = 1, departments: UInt32 = 2 }
    enum Department { static let shelves: UInt32 = 3 }
    enum Product { static let name: UInt32 = 2 }
}
