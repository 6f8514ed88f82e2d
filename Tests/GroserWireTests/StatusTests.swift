import GroserWire
import Testing

/// Every code with its gRPC number and name (google.rpc.Code).
private let grpcCodes: [(StatusCode, Int32, String)] = [
    (.ok, 0, "OK"),
    (.cancelled, 1, "CANCELLED"),
    (.unknown, 2, "UNKNOWN"),
    (.invalidArgument, 3, "INVALID_ARGUMENT"),
    (.deadlineExceeded, 4, "DEADLINE_EXCEEDED"),
    (.notFound, 5, "NOT_FOUND"),
    (.alreadyExists, 6, "ALREADY_EXISTS"),
    (.permissionDenied, 7, "PERMISSION_DENIED"),
    (.resourceExhausted, 8, "RESOURCE_EXHAUSTED"),
    (.failedPrecondition, 9, "FAILED_PRECONDITION"),
    (.aborted, 10, "ABORTED"),
    (.outOfRange, 11, "OUT_OF_RANGE"),
    (.unimplemented, 12, "UNIMPLEMENTED"),
    (.internal, 13, "INTERNAL"),
    (.unavailable, 14, "UNAVAILABLE"),
    (.dataLoss, 15, "DATA_LOSS"),
    (.unauthenticated, 16, "UNAUTHENTICATED"),
]

@Suite("Status codes")
struct StatusTests {
    @Test(arguments: grpcCodes)
    func codesAreNumberedAndNamedAsGRPC(code: StatusCode, number: Int32, name: String) {
        #expect(code.rawValue == number)
        #expect(code.description == name)
        #expect(StatusCode(rawValue: number) == code)
    }

    @Test func theCodesAreDistinct() {
        #expect(Set(grpcCodes.map(\.0)).count == grpcCodes.count)
    }

    @Test(arguments: [(Int32(17), "CODE_17"), (42, "CODE_42"), (1000, "CODE_1000"), (-1, "CODE_-1")])
    func unknownNumbersKeepTheirNumber(number: Int32, name: String) {
        let code = StatusCode(rawValue: number)
        #expect(code.rawValue == number)
        #expect(code.description == name)
        #expect(code != .unknown)
    }

    @Test func statusDescriptionAndOK() {
        #expect(Status(.notFound, "No shelf has the uid \"x\".").description == "NOT_FOUND: No shelf has the uid \"x\".")
        #expect(Status(.unimplemented).description == "UNIMPLEMENTED")
        #expect(Status.ok.description == "OK")
        #expect(Status.ok.isOK)
        #expect(Status(.ok, "").isOK)
        #expect(!Status(.notFound).isOK)
        #expect(!Status(StatusCode(rawValue: 42)).isOK)
    }
}
