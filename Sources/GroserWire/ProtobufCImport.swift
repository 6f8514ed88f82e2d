import CGroserProto
import CProtobufC
#if canImport(Glibc)
import Glibc
#endif

// Catalog records (import and export) <-> protobuf-c. As in ProtobufC.swift:
// C memory lives in an arena or is freed in the scope that unpacked it.

extension Arena {
    func catalogRecord(_ r: NumberedRecord) -> UnsafeMutablePointer<Groser__V1__CatalogRecord> {
        message(Groser__V1__CatalogRecord.self) { p in
            groser__v1__catalog_record__init(p)
            p.pointee.line = r.line
            switch r.record {
            case .city(let c):
                p.pointee.record_case = GROSER__V1__CATALOG_RECORD__RECORD_CITY
                var bare = c
                bare.stores = []
                p.pointee.city = city(bare)
            case .store(let s):
                p.pointee.record_case = GROSER__V1__CATALOG_RECORD__RECORD_STORE
                p.pointee.store = storeSummary(s)
            case .department(let d):
                p.pointee.record_case = GROSER__V1__CATALOG_RECORD__RECORD_DEPARTMENT
                p.pointee.department = message(Groser__V1__DepartmentRecord.self) { m in
                    groser__v1__department_record__init(m)
                    m.pointee.uid = string(d.uid)
                    m.pointee.store_uid = string(d.storeUID)
                    m.pointee.name = string(d.name)
                }
            case .shelf(let h):
                p.pointee.record_case = GROSER__V1__CATALOG_RECORD__RECORD_SHELF
                p.pointee.shelf = message(Groser__V1__ShelfRecord.self) { m in
                    groser__v1__shelf_record__init(m)
                    m.pointee.uid = string(h.uid)
                    m.pointee.department_uid = string(h.departmentUID)
                    m.pointee.name = string(h.name)
                }
            case .product(let v):
                p.pointee.record_case = GROSER__V1__CATALOG_RECORD__RECORD_PRODUCT
                p.pointee.product = message(Groser__V1__ProductRecord.self) { m in
                    groser__v1__product_record__init(m)
                    m.pointee.product = product(v.product)
                    m.pointee.stock = v.stock
                    m.pointee.barcode = string(v.barcode)
                }
            }
        }
    }

    func importRequest(_ chunk: ImportChunk) -> UnsafeMutablePointer<Groser__V1__ImportCatalogRequest> {
        message(Groser__V1__ImportCatalogRequest.self) { p in
            groser__v1__import_catalog_request__init(p)
            p.pointee.import_id = chunk.importID
            p.pointee.n_records = chunk.records.count
            p.pointee.records = array(chunk.records.map(catalogRecord))
            p.pointee.replace = chunk.replace ? 1 : 0
            p.pointee.commit = chunk.commit ? 1 : 0
            p.pointee.abort = chunk.abort ? 1 : 0
        }
    }

    /// Fills the request's method for ImportCatalog (its records are oneofs); false for others.
    func importMethod(_ method: RequestMethod, into p: UnsafeMutablePointer<Groser__V1__Request>) -> Bool {
        switch method {
        case .importCatalog(let chunk):
            p.pointee.method_case = GROSER__V1__REQUEST__METHOD_IMPORT_CATALOG
            p.pointee.import_catalog = importRequest(chunk)
        default:
            return false
        }
        return true
    }
}

func catalogRecord(_ p: UnsafeMutablePointer<Groser__V1__CatalogRecord>) -> NumberedRecord? {
    let c = p.pointee
    let record: CatalogRecord
    switch c.record_case {
    case GROSER__V1__CATALOG_RECORD__RECORD_CITY:
        guard let m = c.city?.pointee else { return nil }
        record = .city(City(uid: str(m.uid), code: str(m.code), name: str(m.name), stores: [], defaultStoreUID: str(m.default_store_uid)))
    case GROSER__V1__CATALOG_RECORD__RECORD_STORE:
        guard let m = c.store?.pointee else { return nil }
        record = .store(StoreSummary(uid: str(m.uid), name: str(m.name), chain: str(m.chain), address: str(m.address), cityUID: str(m.city_uid)))
    case GROSER__V1__CATALOG_RECORD__RECORD_DEPARTMENT:
        guard let m = c.department?.pointee else { return nil }
        record = .department(CatalogDepartment(uid: str(m.uid), storeUID: str(m.store_uid), name: str(m.name)))
    case GROSER__V1__CATALOG_RECORD__RECORD_SHELF:
        guard let m = c.shelf?.pointee else { return nil }
        record = .shelf(CatalogShelf(uid: str(m.uid), departmentUID: str(m.department_uid), name: str(m.name)))
    case GROSER__V1__CATALOG_RECORD__RECORD_PRODUCT:
        guard let m = c.product?.pointee else { return nil }
        record = .product(CatalogProduct(product: Product(m.product), stock: m.stock, barcode: str(m.barcode)))
    default:
        return nil
    }
    return NumberedRecord(line: c.line, record: record)
}

/// A record without one of the five kinds (from a newer client) has line
/// and kind `nil`: the importer refuses it with its line.
func decodeImportMethod(_ c: Groser__V1__Request) -> RequestMethod? {
    switch c.method_case {
    case GROSER__V1__REQUEST__METHOD_IMPORT_CATALOG:
        let g = c.import_catalog.pointee
        var records: [NumberedRecord] = []
        records.reserveCapacity(g.n_records)
        for r in items(g.records, g.n_records) {
            records.append(catalogRecord(r) ?? NumberedRecord(line: r.pointee.line, record: .city(City(uid: "", code: "", name: "", stores: [], defaultStoreUID: ""))))
        }
        return .importCatalog(ImportChunk(importID: g.import_id, records: records, replace: g.replace != 0,
                                          commit: g.commit != 0, abort: g.abort != 0))
    default:
        return nil
    }
}

func decodeImportBody(_ c: Groser__V1__Response) -> ResponseBody? {
    switch c.body_case {
    case GROSER__V1__RESPONSE__BODY_EXPORT_CATALOG:
        let b = c.export_catalog.pointee
        return .exportCatalog(ExportPage(records: items(b.records, b.n_records).compactMap { catalogRecord($0)?.record },
                                         nextPageToken: str(b.next_page_token), catalogVersion: b.catalog_version))
    default:
        return nil
    }
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
