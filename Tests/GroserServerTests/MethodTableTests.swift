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

    /// The server routes by the table: each method goes where its row says.
    @Test func theServerRoutesByTheTable() {
        let samples: [RequestMethod] = [
            .serverInfo, .listCities, .getShelf(shelfUID: "x", knownStoreVersion: 0), .stats, .cancelWatch(watchID: 1),
            .watch(selector: .cityCode("SPB"), sinceVersion: 0), .whoAmI(session: "s"), .logout(session: "s"),
            .listOrders(session: "s"),
        ]
        for method in samples {
            let info = method.field!.info
            #expect(CommerceService.handles(method) == info.isDeferred, "\(info.name)")
            #expect(CustomerService.handles(method) == (info.executor == .customerShard || info.executor == .accountWorkers))
            #expect(RequestHandler.answeredByLoop(method) == (info.executor == .eventLoop))
        }
        #expect(MethodTable.all.filter { $0.executor == .importThread }.map(\.field) == [.importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter { $0.access == .operators }.map(\.field) == [.setProduct, .importCatalog, .exportCatalog])
        #expect(MethodTable.all.filter(\.streams).map(\.field) == [.watch])
    }
}
