@testable import GroserBench
import GroserWire
import Testing

@Suite("request frames and the response envelope")
struct WireTests {
    @Test(arguments: [0, 1, 127, 1 << 20, (1 << 48) - 1] as [UInt64])
    func aPatchedRequestFrameDecodesWithItsId(sequence: UInt64) throws {
        let method = BenchMethod.getStore(.cityCode("SPB"), includeProducts: true)
        var frame = RequestFrame(method: method).bytes
        let id = RequestFrame.id(sequence: sequence)
        frame.withUnsafeMutableBytes { RequestFrame.writeID(id, into: $0.baseAddress! + RequestFrame.idOffset) }
        let length = Int(frame[0]) << 24 | Int(frame[1]) << 16 | Int(frame[2]) << 8 | Int(frame[3])
        #expect(length == frame.count - Framing.headerSize)
        let request = try Request.decode(frame[Framing.headerSize...])
        #expect(request.id == id)
        #expect(request.method == method.requestMethod)
    }

    @Test func idsStayEightByteVarints() {
        #expect(ProtoWriter.varintSize(RequestFrame.id(sequence: 0)) == 8)
        #expect(ProtoWriter.varintSize(RequestFrame.id(sequence: UInt64.max)) == 8)
    }

    @Test func anOKResponseEnvelope() throws {
        let body: [UInt8] = Array(repeating: 0x41, count: 300)
        var frame: [UInt8] = []
        ResponseFrameWriter.appendOK(id: 1 << 50, field: .getStore, body: body, to: &frame)
        let envelope = frame[Framing.headerSize...].withUnsafeBytes { ResponseEnvelope.parse($0) }
        #expect(envelope == ResponseEnvelope(id: 1 << 50, statusCode: 0, bodyField: MethodField.getStore.rawValue, bodyBytes: 300))
    }

    @Test func anErrorResponseEnvelope() throws {
        var frame: [UInt8] = []
        ResponseFrameWriter.appendStatus(id: 77, status: Status(.notFound, "No city has the code \"NOPE\""), to: &frame)
        let envelope = frame[Framing.headerSize...].withUnsafeBytes { ResponseEnvelope.parse($0) }
        #expect(envelope == ResponseEnvelope(id: 77, statusCode: 5, bodyField: 0, bodyBytes: 0))
    }

    @Test func fieldsInAnyOrderAndUnknownFieldsAreRead() {
        // body (field 12, 2 bytes), an unknown fixed32 (field 7), status {code 8}, then id 9.
        let bytes: [UInt8] = [0x62, 0x02, 0xaa, 0xbb, 0x3d, 1, 2, 3, 4, 0x12, 0x02, 0x08, 0x08, 0x08, 0x09]
        let envelope = bytes.withUnsafeBytes { ResponseEnvelope.parse($0) }
        #expect(envelope == ResponseEnvelope(id: 9, statusCode: 8, bodyField: 12, bodyBytes: 2))
    }

    @Test(arguments: [[0x08], [0x62, 0x05, 0x00], [0x12, 0x01], [0x0b], [0x00, 0x00]] as [[UInt8]])
    func truncatedOrMalformedBytesAreRejected(bytes: [UInt8]) {
        #expect(bytes.withUnsafeBytes { ResponseEnvelope.parse($0) } == nil)
    }

    @Test func aTallyCountsErrorsByCodeAndNeverAsSuccesses() {
        var tally = BenchTally()
        tally.count(ResponseEnvelope(id: 5, statusCode: 5), expectedID: 5, expectedField: 12, frameBytes: 40, latency: 1000)
        tally.count(ResponseEnvelope(id: 6, bodyField: 12, bodyBytes: 10), expectedID: 7, expectedField: 12, frameBytes: 40, latency: 1000)
        tally.count(ResponseEnvelope(id: 8, bodyField: 11, bodyBytes: 10), expectedID: 8, expectedField: 12, frameBytes: 40, latency: 1000)
        tally.count(nil, expectedID: 9, expectedField: 12, frameBytes: 40, latency: 1000)
        tally.count(ResponseEnvelope(id: 10, bodyField: 12, bodyBytes: 10), expectedID: 10, expectedField: 12, frameBytes: 40, latency: 1000)
        #expect(tally.succeeded == 1)
        #expect(tally.failedByCode == [5: 1])
        #expect(tally.idMismatches == 1 && tally.wrongBodies == 1 && tally.malformed == 1)
        #expect(tally.failed == 4)
        #expect(tally.histogram.totalCount == 1)
    }

    @Test func theLastLineHasItsShape() {
        var tally = BenchTally()
        tally.count(ResponseEnvelope(id: 1, bodyField: 10, bodyBytes: 3), expectedID: 1, expectedField: 10, frameBytes: 20, latency: 15_000)
        let report = BenchReport(BenchResult(options: BenchOptions(), seconds: 0.5, tally: tally))
        #expect(report.lastLine == "rps=2 p50_us=15 p99_us=15")
        #expect(report.text.hasSuffix(report.lastLine + "\n"))
        #expect(report.json.hasSuffix("}\n" + report.lastLine + "\n"))
    }

    @Test(arguments: [(1.0, 0, "1"), (2.345, 2, "2.35"), (0.05, 1, "0.1"), (1234.5, 3, "1234.500"), (-1.5, 1, "-1.5")] as [(Double, Int, String)])
    func numbersFormatWithoutFoundation(value: Double, decimals: Int, text: String) {
        #expect(BenchReport.format(value, decimals) == text)
    }
}
