import Foundation
import GroserClient
import GroserSystem
import Testing

@Suite("groserd through the Swift client library", .serialized)
struct ClientLibraryTests {
    let daemon: Daemon
    init() throws { daemon = try Daemon() }

    @Test func listsAtLeastFiveCitiesWithTheirDefaultStores() throws {
        let list = try daemon.client().listCities()
        #expect(list.cities.count >= 5)
        let codes = list.cities.map(\.code)
        #expect(codes.contains("MSK") && codes.contains("SPB"))
        #expect(codes == codes.sorted())
        for city in list.cities {
            #expect(!city.stores.isEmpty && city.stores.count <= 3)
            #expect(city.stores.contains { $0.uid == city.defaultStoreUID }, "\(city.code)'s default store is one of its stores")
        }
        #expect(list.catalogVersion >= 1)
    }

    @Test func spbDefaultStoreHasDepartmentsAndShelvesButNoProductsUnlessAsked() throws {
        let client = daemon.client()
        let cities = try client.listCities().cities
        let spb = try #require(cities.first { $0.code == "SPB" })
        let bare = try client.store(.cityCode("SPB"))
        #expect(bare.store.uid == spb.defaultStoreUID)
        #expect(bare.city.code == "SPB")
        #expect(bare.store.departments.count >= 8)
        let shelves = bare.store.departments.flatMap(\.shelves)
        #expect(shelves.count >= 30)
        #expect(shelves.allSatisfy { $0.productCount > 0 && $0.products.isEmpty })
        #expect(shelves.reduce(0) { $0 + Int($1.productCount) } >= 500)

        let full = try client.store(.storeUID(spb.defaultStoreUID), includeProducts: true)
        let products = full.store.departments.flatMap(\.shelves).flatMap(\.products)
        #expect(products.count == shelves.reduce(0) { $0 + Int($1.productCount) })
        for p in products {
            #expect(p.price.currency == "RUB" && p.price.minorUnits > 0)
            #expect(p.imageURL.hasPrefix(daemon.imageBaseURL + "/"), "image URL \(p.imageURL) is absolute under the base")
            #expect(!p.imageURL.dropFirst(daemon.imageBaseURL.count).contains("://"))
        }
        #expect(try client.store(.cityUID(spb.uid)).store.uid == spb.defaultStoreUID)
        #expect(try client.store(.cityCode("spb")).store.uid == spb.defaultStoreUID, "codes match case-insensitively")
    }

    @Test func shelfProductsComeSortedByName() throws {
        let client = daemon.client()
        let store = try client.store(.cityCode("MSK"))
        let shelfUID = try #require(store.store.departments.first?.shelves.first?.uid)
        let shelf = try client.shelf(shelfUID)
        #expect(shelf.storeUID == store.store.uid)
        #expect(!shelf.shelf.products.isEmpty)
        #expect(shelf.shelf.products.map(\.name) == shelf.shelf.products.map(\.name).sorted())
        #expect(shelf.shelf.products.allSatisfy { $0.shelfUID == shelfUID })
    }

    @Test func unknownThingsAnswerNotFoundWithOneSentence() throws {
        let client = daemon.client()
        for call in [{ _ = try client.store(.cityCode("NOPE")) },
                     { _ = try client.store(.storeUID("store-nope")) },
                     { _ = try client.shelf("shelf-nope") }] as [() throws -> Void] {
            do {
                try call()
                Issue.record("expected NOT_FOUND")
            } catch let error as GroserError {
                #expect(error.status?.code == .notFound)
                #expect(error.status?.message.hasSuffix(".") == true)
            }
        }
        // The connection is still good after errors.
        #expect(try client.serverInfo().protocolVersion == 1)
    }

    @Test func serverInfoNamesTheMethodsAndCounts() throws {
        let info = try daemon.client().serverInfo()
        #expect(info.serverVersion.hasPrefix("groserd "))
        #expect(info.methods == MethodTable.all.map(\.name))
        #expect(info.catalogVersion >= 1)
        #expect(info.uptimeMilliseconds < 600_000)
    }

    @Test func asyncCallsFromManyTasksShareOneClient() async throws {
        let client = daemon.client()
        let codes = try await client.listCities().cities.map(\.code)
        try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<40 {
                let code = codes[i % codes.count]
                group.addTask { try await client.store(.cityCode(code)).city.code }
            }
            var answered: [String] = []
            for try await code in group { answered.append(code) }
            #expect(answered.count == 40)
            #expect(Set(answered) == Set(codes))
        }
    }

    @Test func blockingCallsFromManyThreadsShareOneClient() throws {
        let client = daemon.client()
        let failures = Mutex2()
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            for _ in 0..<25 {
                do {
                    let info = try client.serverInfo()
                    if info.protocolVersion != 1 { failures.add("bad protocol version on thread \(i)") }
                } catch {
                    failures.add("\(error)")
                }
            }
        }
        #expect(failures.values.isEmpty)
    }

    @Test func aCallTimesOutWhenNothingAnswers() throws {
        // A listener that accepts and never answers.
        let dir = Daemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let listener = try Socket.unixStream(nonBlocking: false)
        defer { listener.close() }
        try listener.bind(path: dir + "/mute.sock", mode: 0o600)
        try listener.listen(backlog: 4)
        let client = GroserClient(socketPath: dir + "/mute.sock", timeout: 0.3)
        let started = Date()
        do {
            _ = try client.serverInfo()
            Issue.record("expected a timeout")
        } catch {
            guard case .timedOut = error else { Issue.record("expected timedOut, got \(error)"); return }
        }
        #expect(Date().timeIntervalSince(started) < 3)
    }

    @Test func aMissingDaemonIsCannotConnect() throws {
        let client = GroserClient(socketPath: "/tmp/gsr-does-not-exist/g.sock", timeout: 1)
        do {
            _ = try client.listCities()
            Issue.record("expected cannotConnect")
        } catch {
            guard case .cannotConnect = error else { Issue.record("expected cannotConnect, got \(error)"); return }
        }
    }

    @Test func theClientReconnectsAfterTheDaemonRestarts() throws {
        let client = daemon.client()
        _ = try client.serverInfo()
        #expect(daemon.terminate() == 0)
        try daemon.start()
        #expect(try client.serverInfo().protocolVersion == 1)
    }
}

/// A tiny thread-safe list of failure messages.
final class Mutex2: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.lock(); items.append(s); lock.unlock() }
    var values: [String] { lock.lock(); defer { lock.unlock() }; return items }
}
