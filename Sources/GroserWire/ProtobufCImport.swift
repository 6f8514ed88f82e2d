import CGroserProto
import CProtobufC
#if canImport(Glibc)
import Glibc
#endif

// Catalog records (import and export) <-> protobuf-c: the record oneof and
// ExportCatalog's answer (records without their line numbers). As in
// ProtobufC.swift, C memory lives in an arena or is freed in the scope that
// unpacked it.

extension Arena {
    /// A record as ImportCatalog sends it and ExportCatalog answers it: a
    /// city without its stores (the stores are records of their own).
    func catalogRecord(_ r: NumberedRecord) -> UnsafeMutablePointer<Groser__V1__CatalogRecord> {
        message(Groser__V1__CatalogRecord.self) { p in
            groser__v1__catalog_record__init(p)
            p.pointee.line = r.line
            switch r.record {
            case .city(var c): c.stores = []; p.pointee.city = city(c)
            case .store(let s): p.pointee.store = storeSummary(s)
            case .department(let d): p.pointee.department = departmentRecord(d)
            case .shelf(let h): p.pointee.shelf = shelfRecord(h)
            case .product(let v): p.pointee.product = productRecord(v)
            }
            p.pointee.record_case = switch r.record {
            case .city: GROSER__V1__CATALOG_RECORD__RECORD_CITY
            case .store: GROSER__V1__CATALOG_RECORD__RECORD_STORE
            case .department: GROSER__V1__CATALOG_RECORD__RECORD_DEPARTMENT
            case .shelf: GROSER__V1__CATALOG_RECORD__RECORD_SHELF
            case .product: GROSER__V1__CATALOG_RECORD__RECORD_PRODUCT
            }
        }
    }
}

extension CatalogRecord {
    /// The record of an unpacked CatalogRecord; nil when none is set (or
    /// one this build does not know).
    init?(_ c: Groser__V1__CatalogRecord) {
        switch c.record_case {
        case GROSER__V1__CATALOG_RECORD__RECORD_CITY:
            var city = City(c.city)
            city.stores = []  // a city record's stores are ignored (service.proto): stores are records of their own
            self = .city(city)
        case GROSER__V1__CATALOG_RECORD__RECORD_STORE: self = .store(StoreSummary(c.store))
        case GROSER__V1__CATALOG_RECORD__RECORD_DEPARTMENT: self = .department(CatalogDepartment(c.department))
        case GROSER__V1__CATALOG_RECORD__RECORD_SHELF: self = .shelf(CatalogShelf(c.shelf))
        case GROSER__V1__CATALOG_RECORD__RECORD_PRODUCT: self = .product(CatalogProduct(c.product))
        default: return nil
        }
    }
}

extension NumberedRecord {
    /// A record with none set reads as an empty city at its line, which the
    /// import refuses naming that line.
    init(_ p: UnsafeMutablePointer<Groser__V1__CatalogRecord>?) {
        let c = p?.pointee ?? Groser__V1__CatalogRecord()
        self.init(line: c.line, record: CatalogRecord(c) ?? .city(City(UnsafeMutablePointer<Groser__V1__City>?.none)))
    }
}

/// ExportCatalog's body of an unpacked response, or nil for another body.
func decodeImportBody(_ c: Groser__V1__Response) -> ResponseBody? {
    guard c.body_case == GROSER__V1__RESPONSE__BODY_EXPORT_CATALOG else { return nil }
    let b = c.export_catalog.pointee
    return .exportCatalog(ExportPage(records: items(b.records, b.n_records).compactMap { CatalogRecord($0.pointee) },
                                     nextPageToken: str(b.next_page_token), catalogVersion: b.catalog_version))
}

extension BodyEncoder {
    public static func exportCatalog(_ v: ExportPage) -> [UInt8] {
        Arena.packed { arena in
            arena.message(Groser__V1__ExportCatalogResponse.self) { p in
                groser__v1__export_catalog_response__init(p)
                p.pointee.n_records = v.records.count
                p.pointee.records = arena.array(v.records.map { arena.catalogRecord(NumberedRecord(line: 0, record: $0)) })
                p.pointee.next_page_token = arena.string(v.nextPageToken)
                p.pointee.catalog_version = v.catalogVersion
            }
        }
    }

    /// The encoding of one record's message, to measure a page against the frame maximum.
    public static func recordSize(_ r: CatalogRecord) -> Int {
        let arena = Arena()
        return Int(arena.withMessage(arena.catalogRecord(NumberedRecord(line: 0, record: r))) { protobuf_c_message_get_packed_size($0) })
    }
}
