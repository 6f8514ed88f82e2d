@testable import GroserSystem
import Testing

@Suite("the latency histogram")
struct LatencyHistogramTests {
    @Test func percentilesOfOneToAThousandMicroseconds() {
        var h = LatencyHistogram()
        for us in 1...1000 { h.record(UInt64(us) * 1000) }
        #expect(h.totalCount == 1000)
        for (p, exact) in [(50.0, 500_000.0), (90, 900_000), (99, 990_000), (99.9, 999_000), (100, 1_000_000)] {
            let v = Double(h.value(atPercentile: p))
            #expect(v >= exact && v <= exact * (1 + 1.0 / 128), "p\(p) is \(v), exact \(exact)")
        }
        #expect(h.maximum == 1_000_000)
        #expect(h.minimum == 1000)
        #expect(abs(h.mean - 500_500) < 1)
    }

    @Test func smallValuesAreExact() {
        var h = LatencyHistogram()
        for v in [3, 3, 7, 120] as [UInt64] { h.record(v) }
        #expect(h.value(atPercentile: 50) == 3)
        #expect(h.value(atPercentile: 75) == 7)
        #expect(h.value(atPercentile: 100) == 120)
    }

    @Test(arguments: [0, 1, 127, 128, 129, 255, 256, 1000, 123_456, 9_999_999, 1 << 40, UInt64.max] as [UInt64])
    func everyValueFallsInABucketThatHoldsIt(value: UInt64) {
        let index = LatencyHistogram.bucketIndex(value)
        #expect(index < LatencyHistogram.bucketCount)
        let highest = LatencyHistogram.highestValue(ofBucket: index)
        #expect(highest >= value)
        #expect(Double(highest - value) <= Double(value) / 128)
        if index > 0 { #expect(LatencyHistogram.highestValue(ofBucket: index - 1) < value) }
    }

    @Test func aSkewedDistributionReportsItsTail() {
        var h = LatencyHistogram()
        h.record(20_000, count: 990)       // 20 µs
        h.record(5_000_000, count: 10)     // 5 ms
        #expect(h.value(atPercentile: 50) <= 20_200)
        #expect(h.value(atPercentile: 99) <= 20_200)
        #expect(h.value(atPercentile: 99.9) >= 5_000_000)
    }

    @Test func mergingEqualsRecordingInOne() {
        var a = LatencyHistogram(), b = LatencyHistogram(), both = LatencyHistogram()
        for v in stride(from: UInt64(1000), to: 2_000_000, by: 997) {
            if v % 2 == 0 { a.record(v) } else { b.record(v) }
            both.record(v)
        }
        a.merge(b)
        #expect(a == both)
        #expect(a.value(atPercentile: 90) == both.value(atPercentile: 90))
    }

    @Test func anEmptyHistogramAnswersZero() {
        let h = LatencyHistogram()
        #expect(h.value(atPercentile: 50) == 0)
        #expect(h.mean == 0)
    }
}
