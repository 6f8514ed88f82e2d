@testable import GroserServer
import GroserWire
import Testing

@Suite("the generated field numbers of the answers groserd writes itself match the compiled descriptors")
struct AnswerFieldsTests {
    static let fields: [(message: String, field: String, number: UInt32)] = [
        ("ServerInfoResponse", "uptime_ms", FieldNumbers.ServerInfoResponse.uptimeMilliseconds),
        ("ServerInfoResponse", "catalog_version", FieldNumbers.ServerInfoResponse.catalogVersion),
        ("ListCitiesResponse", "catalog_version", FieldNumbers.ListCitiesResponse.catalogVersion),
        ("GetStoreResponse", "store", FieldNumbers.GetStoreResponse.store),
        ("GetStoreResponse", "city", FieldNumbers.GetStoreResponse.city),
        ("GetStoreResponse", "catalog_version", FieldNumbers.GetStoreResponse.catalogVersion),
        ("GetStoreResponse", "store_version", FieldNumbers.GetStoreResponse.storeVersion),
        ("GetStoreResponse", "not_modified", FieldNumbers.GetStoreResponse.notModified),
        ("GetShelfResponse", "shelf", FieldNumbers.GetShelfResponse.shelf),
        ("GetShelfResponse", "store_uid", FieldNumbers.GetShelfResponse.storeUID),
        ("GetShelfResponse", "department_uid", FieldNumbers.GetShelfResponse.departmentUID),
        ("GetShelfResponse", "catalog_version", FieldNumbers.GetShelfResponse.catalogVersion),
        ("GetShelfResponse", "store_version", FieldNumbers.GetShelfResponse.storeVersion),
        ("GetShelfResponse", "not_modified", FieldNumbers.GetShelfResponse.notModified),
        ("ListStoresResponse", "stores", FieldNumbers.ListStoresResponse.stores),
        ("ListStoresResponse", "city_uid", FieldNumbers.ListStoresResponse.cityUID),
        ("ListStoresResponse", "catalog_version", FieldNumbers.ListStoresResponse.catalogVersion),
        ("StoreListing", "summary", FieldNumbers.StoreListing.summary),
        ("StoreListing", "is_default", FieldNumbers.StoreListing.isDefault),
        ("StoreListing", "store_version", FieldNumbers.StoreListing.storeVersion),
        ("ListProductsResponse", "products", FieldNumbers.ListProductsResponse.products),
        ("ListProductsResponse", "next_page_token", FieldNumbers.ListProductsResponse.nextPageToken),
        ("ListProductsResponse", "store_version", FieldNumbers.ListProductsResponse.storeVersion),
        ("ListProductsResponse", "total_size", FieldNumbers.ListProductsResponse.totalSize),
        ("SearchProductsResponse", "hits", FieldNumbers.SearchProductsResponse.hits),
        ("SearchProductsResponse", "total_estimate", FieldNumbers.SearchProductsResponse.totalEstimate),
        ("SearchProductsResponse", "next_page_token", FieldNumbers.SearchProductsResponse.nextPageToken),
        ("SearchProductsResponse", "query_used", FieldNumbers.SearchProductsResponse.queryUsed),
        ("SearchProductsResponse", "layout_switched", FieldNumbers.SearchProductsResponse.layoutSwitched),
        ("SearchProductsResponse", "store_uid", FieldNumbers.SearchProductsResponse.storeUID),
        ("SearchProductsResponse", "store_version", FieldNumbers.SearchProductsResponse.storeVersion),
        ("SearchHit", "product", FieldNumbers.SearchHit.product),
        ("SearchHit", "highlights", FieldNumbers.SearchHit.highlights),
        ("SearchHit", "matched_words", FieldNumbers.SearchHit.matchedWords),
        ("SearchHit", "shelf_name", FieldNumbers.SearchHit.shelfName),
        ("SearchHit", "department_uid", FieldNumbers.SearchHit.departmentUID),
        ("SearchHit", "department_name", FieldNumbers.SearchHit.departmentName),
        ("TextRange", "start", FieldNumbers.TextRange.start),
        ("TextRange", "length", FieldNumbers.TextRange.length),
        ("Store", "summary", FieldNumbers.Store.summary),
        ("Store", "departments", FieldNumbers.Store.departments),
        ("Department", "shelves", FieldNumbers.Department.shelves),
        ("Product", "name", FieldNumbers.Product.name),
    ]

    @Test func everyNamedFieldHasTheProtosNumber() throws {
        for (message, field, number) in Self.fields {
            let info = try #require(ProtoSchema.message(named: "groser.v1." + message), "no message \(message)")
            let declared = try #require(info.field(named: field), "\(message) has no field \(field)")
            #expect(declared.number == number, "\(message).\(field)")
        }
    }
}
