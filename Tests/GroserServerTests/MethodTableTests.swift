@testable import GroserServer
import GroserWire
import Testing

@Suite("the method table")
struct MethodTableTests {
    @Test func everyMethodHasOneRowInFieldOrder() {
        #expect(MethodTable.all.map(\.field) == MethodField.allCases)
        for field in MethodField.allCases { #expect(field.info.field == field) }
        #expect(Set(MethodTable.all.map(\.name)).count == MethodTable.all.count)
        #expect(MethodTable.named("GetStore")?.field == .getStore && MethodTable.named("getstore") == nil)
    }

    /// The table's executors and access (the dispatcher's routing by them
    /// is tested in DispatcherTests).
    @Test func theTableNamesTheExecutorsAndAccess() {
        #expect(MethodTable.all.filter { $0.executor == .importThread }.map(\.field) == [.importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter { $0.access == .operators }.map(\.field) == [.setProduct, .importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter(\.streams).map(\.field) == [.watch])
    }
}
