import Foundation
import GroserClient
import GroserSystem
import Testing

/// groser-client never changes state by looking, checks out the cart it
/// showed, and lets a change that may have been applied be retried exactly.
@Suite("honest state through groser-client", .serialized)
struct HonestStateTests {
    let daemon: Daemon
    let configHome: String
    let product: Product

    init() throws {
        daemon = try Daemon()
        configHome = daemon.directory + "/config"
        let store = try daemon.client().store(.cityCode("SPB"), includeProducts: true)
        product = try #require(store.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
    }

    func client(_ arguments: [String], input: String? = nil) throws -> ProgramResult {
        try runProgram(Daemon.groserClient, arguments,
                       environment: minimalEnvironment(["GROSER_SOCKET": daemon.socketPath, "XDG_CONFIG_HOME": configHome]),
                       input: input)
    }

    /// The cart version `cart` printed ("Cart at … · version N").
    func version(_ out: String) -> UInt64? {
        guard let r = out.range(of: #"version (\d+)"#, options: .regularExpression) else { return nil }
        return UInt64(out[r].split(separator: " ")[1])
    }

    @Test func lookingAtAChangedPriceChangesNothingUntilItIsAccepted() throws {
        #expect(try client(["set-city", "SPB"]).status == 0)
        let added = try client(["cart", "add", product.uid, "--qty", "2"])
        #expect(added.status == 0, "\(added.err)")
        let v1 = try #require(version(added.out))
        _ = try daemon.client().setProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: product.price.minorUnits + 500))
        let looked = try client(["cart"])
        #expect(looked.out.contains("price changed from") && version(looked.out) == v1, "\(looked.out)")
        #expect(version(try client(["cart"]).out) == v1, "looking twice still changes nothing")
        // Checkout refuses the unaccepted price, and says how to accept it.
        let refused = try client(["checkout", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin"],
                                 input: "4111 1111 1111 1111\n123\n")
        #expect(refused.status == 64 + 10 && refused.err.contains("cart --accept-prices"), "\(refused.status) \(refused.err)")
        let accepted = try client(["cart", "--accept-prices"])
        #expect(accepted.status == 0 && version(accepted.out) == v1 + 1, "\(accepted.out)")
        // A version that is not the cart's is refused; the one shown checks out.
        let stale = try client(["checkout", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin",
                                "--expect-version", String(v1)], input: "4111 1111 1111 1111\n123\n")
        #expect(stale.status == 64 + 10, "\(stale.status) \(stale.err)")
        let paid = try client(["checkout", "--exp", "12/29", "--name", "IVAN PETROV", "--address", "Nevsky 1", "--card-from-stdin",
                               "--expect-version", String(v1 + 1)], input: "4111 1111 1111 1111\n123\n")
        #expect(paid.status == 0 && paid.out.contains("placed"), "\(paid.status) \(paid.err)")
    }

    @Test func aChangeWithNoAnswerCanBeRetriedExactlyWithItsKey() throws {
        #expect(try client(["set-city", "SPB"]).status == 0)
        #expect(try client(["cart", "add", product.uid]).status == 0)
        // groserd stopped: the add is sent, and no answer comes in time.
        // (--store: no ListCities first, so the add is the call that gets no answer.)
        let store = try #require(try daemon.client().listCities().cities.first { $0.code == "SPB" }?.defaultStoreUID)
        kill(daemon.process.processIdentifier, SIGSTOP)
        let lost = try client(["--timeout", "0.5", "cart", "add", product.uid, "--store", store])
        kill(daemon.process.processIdentifier, SIGCONT)
        #expect(lost.status != 0)
        let key = try #require(lost.err.range(of: #"--idempotency-key [0-9a-f]+"#, options: .regularExpression).map {
            String(lost.err[$0].split(separator: " ")[1])
        }, "\(lost.err)")
        // The add was applied when groserd resumed; the retry with its key is not applied again.
        let retried = try client(["cart", "add", product.uid, "--store", store, "--idempotency-key", key])
        #expect(retried.status == 0, "\(retried.err)")
        let lines = try client(["cart", "--json"]).out
        #expect(lines.contains("\"quantity\": 2"), "two adds, not three: \(lines)")
    }
}
