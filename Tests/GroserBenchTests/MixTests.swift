@testable import GroserBench
import GroserWire
import Testing

@Suite("the read and write mix")
struct MixTests {
    @Test(arguments: [0, 1, 10, 33, 50, 90, 100])
    func everyHundredConsecutiveRequestsHoldExactlyTheShareOfWrites(percent: Int) {
        for phase in [0, 1, 7, 49, 99, 250] {
            for start in [0, 3, 100, 12_345] as [UInt64] {
                let writes = (start..<start + 100).filter {
                    BenchMethod.mixSendsWrite(sequence: $0, phase: phase, percent: percent)
                }.count
                #expect(writes == percent, "phase \(phase), from \(start)")
            }
        }
    }

    @Test func tenPercentIsOneWriteInTenAndConnectionsWriteOutOfStep() {
        let first = (0..<20 as Range<UInt64>).filter { BenchMethod.mixSendsWrite(sequence: $0, phase: 0, percent: 10) }
        #expect(first == [0, 10])
        let second = (0..<20 as Range<UInt64>).filter { BenchMethod.mixSendsWrite(sequence: $0, phase: 1, percent: 10) }
        #expect(second == [9, 19])
    }

    @Test func aMixIsAGetStoreWithoutProductsAndACartAddInTheSameStore() {
        let mix = BenchMethod.mix(.cityCode("SPB"), writePercent: 10, productUID: "p-1")
        #expect(mix.kinds == [.getStore(.cityCode("SPB"), includeProducts: false), .cartAdd(.cityCode("SPB"), productUID: "p-1")])
        #expect(mix.kindNames == ["reads", "writes"])
        #expect(mix.label == "mix --city SPB --write-percent 10 --product p-1")
        #expect(BenchMethod.serverInfo.kinds == [.serverInfo])
        #expect(BenchMethod.serverInfo.kindNames.isEmpty)
    }

    /// A result with 9 reads of 100 µs and 1 write of 2 ms in 0.5 s.
    func mixedReport() -> BenchReport {
        var reads = BenchTally(), writes = BenchTally(), all = BenchTally()
        for id in 1...9 as ClosedRange<UInt64> {
            reads.count(ResponseEnvelope(id: id, bodyField: MethodField.getStore.rawValue, bodyBytes: 100), expectedID: id,
                        expectedField: MethodField.getStore.rawValue, frameBytes: 120, latency: 100_000)
        }
        writes.count(ResponseEnvelope(id: 10, bodyField: MethodField.addItem.rawValue, bodyBytes: 50), expectedID: 10,
                     expectedField: MethodField.addItem.rawValue, frameBytes: 70, latency: 2_000_000)
        all.merge(reads)
        all.merge(writes)
        var options = BenchOptions()
        options.method = .mix(.cityCode("SPB"), writePercent: 10, productUID: nil)
        return BenchReport(BenchResult(options: options, seconds: 0.5, tally: all, parts: [
            BenchPart(name: "reads", method: options.method.kinds[0], tally: reads),
            BenchPart(name: "writes", method: options.method.kinds[1], tally: writes),
        ]))
    }

    @Test func theJSONGivesReadsAndWritesApart() {
        let json = mixedReport().json
        #expect(json.contains("\"method\":\"mix --city SPB --write-percent 10\""))
        #expect(json.contains("\"reads\":{\"method\":\"get-store --city SPB\",\"succeeded\":9,\"failed\":0,\"rps\":18.0,"
                              + "\"latency_us\":{\"p50\":100.000,"))
        #expect(json.contains("\"writes\":{\"method\":\"cart-add --city SPB\",\"succeeded\":1,\"failed\":0,\"rps\":2.0,"
                              + "\"latency_us\":{\"p50\":2000.000,"))
        #expect(json.hasSuffix("}\nrps=20 p50_us=100 p99_us=2000\n"))
    }

    @Test func theTextGivesReadsAndWritesApart() {
        let text = mixedReport().text
        #expect(text.contains("\nreads:           get-store --city SPB: 9 ok, 0 failed, 18 requests/s\n  latency (µs):  p50 100.0"))
        #expect(text.contains("\nwrites:          cart-add --city SPB: 1 ok, 0 failed, 2 requests/s\n  latency (µs):  p50 2000.0"))
        #expect(text.hasSuffix("rps=20 p50_us=100 p99_us=2000\n"))
    }

    @Test func aSingleMethodHasNoParts() {
        let report = BenchReport(BenchResult(options: BenchOptions(), seconds: 1, tally: BenchTally()))
        #expect(!report.json.contains("\"reads\""))
        #expect(!report.text.contains("reads:"))
    }
}
