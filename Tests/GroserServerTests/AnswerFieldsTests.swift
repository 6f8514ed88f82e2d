@testable import GroserServer
import GroserWire
import Testing

@Suite("the field numbers of the answers groserd writes itself match the .protos")
struct AnswerFieldsTests {
    static let fields: [(message: String, field: String, number: UInt32)] = [
        ("ServerInfoResponse", "uptime_ms", AnswerField.ServerInfo.uptimeMS),
        ("ServerInfoResponse", "catalog_version", AnswerField.ServerInfo.catalogVersion),
        ("ListCitiesResponse", "catalog_version", AnswerField.ListCities.catalogVersion),
        ("GetStoreResponse", "store", AnswerField.GetStore.store),
        ("GetStoreResponse", "city", AnswerField.GetStore.city),
        ("GetStoreResponse", "catalog_version", AnswerField.GetStore.catalogVersion),
        ("GetStoreResponse", "store_version", AnswerField.GetStore.storeVersion),
        ("GetStoreResponse", "not_modified", AnswerField.GetStore.notModified),
        ("GetShelfResponse", "shelf", AnswerField.GetShelf.shelf),
        ("GetShelfResponse", "store_uid", AnswerField.GetShelf.storeUID),
        ("GetShelfResponse", "department_uid", AnswerField.GetShelf.departmentUID),
        ("GetShelfResponse", "catalog_version", AnswerField.GetShelf.catalogVersion),
        ("GetShelfResponse", "store_version", AnswerField.GetShelf.storeVersion),
        ("GetShelfResponse", "not_modified", AnswerField.GetShelf.notModified),
        ("ListStoresResponse", "stores", AnswerField.ListStores.stores),
        ("ListStoresResponse", "city_uid", AnswerField.ListStores.cityUID),
        ("ListStoresResponse", "catalog_version", AnswerField.ListStores.catalogVersion),
        ("StoreListing", "summary", AnswerField.StoreListing.summary),
        ("StoreListing", "is_default", AnswerField.StoreListing.isDefault),
        ("StoreListing", "store_version", AnswerField.StoreListing.storeVersion),
        ("ListProductsResponse", "products", AnswerField.ListProducts.products),
        ("ListProductsResponse", "next_page_token", AnswerField.ListProducts.nextPageToken),
        ("ListProductsResponse", "store_version", AnswerField.ListProducts.storeVersion),
        ("ListProductsResponse", "total_size", AnswerField.ListProducts.totalSize),
        ("SearchProductsResponse", "hits", AnswerField.SearchProducts.hits),
        ("SearchProductsResponse", "total_estimate", AnswerField.SearchProducts.totalEstimate),
        ("SearchProductsResponse", "next_page_token", AnswerField.SearchProducts.nextPageToken),
        ("SearchProductsResponse", "query_used", AnswerField.SearchProducts.queryUsed),
        ("SearchProductsResponse", "layout_switched", AnswerField.SearchProducts.layoutSwitched),
        ("SearchProductsResponse", "store_uid", AnswerField.SearchProducts.storeUID),
        ("SearchProductsResponse", "store_version", AnswerField.SearchProducts.storeVersion),
        ("SearchHit", "product", AnswerField.SearchHit.product),
        ("SearchHit", "highlights", AnswerField.SearchHit.highlights),
        ("SearchHit", "matched_words", AnswerField.SearchHit.matchedWords),
        ("SearchHit", "shelf_name", AnswerField.SearchHit.shelfName),
        ("SearchHit", "department_uid", AnswerField.SearchHit.departmentUID),
        ("SearchHit", "department_name", AnswerField.SearchHit.departmentName),
        ("TextRange", "start", AnswerField.TextRange.start),
        ("TextRange", "length", AnswerField.TextRange.length),
        ("Store", "summary", AnswerField.Store.summary),
        ("Store", "departments", AnswerField.Store.departments),
        ("Department", "shelves", AnswerField.Department.shelves),
        ("Product", "name", AnswerField.Product.name),
    ]

    @Test func everyNamedFieldHasTheProtosNumber() throws {
        for (message, field, number) in Self.fields {
            let info = try #require(ProtoSchema.message(named: "groser.v1." + message), "no message \(message)")
            let declared = try #require(info.field(named: field), "\(message) has no field \(field)")
            #expect(declared.number == number, "\(message).\(field)")
        }
    }
}
