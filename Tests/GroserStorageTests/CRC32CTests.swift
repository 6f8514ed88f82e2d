@testable import GroserStorage
import GroserSystem
import Testing

/// The customer log's checksum: a wrong CRC would make every log unreadable
/// by another build (or refuse a good one at start), so both ways of
/// computing it are checked against published values and each other.
@Suite("CRC-32C")
struct CRC32CTests {
    /// RFC 3720's check value and test vectors (iSCSI, appendix B.4).
    static let vectors: [([UInt8], UInt32)] = [
        (Array("123456789".utf8), 0xE306_9283),
        ([UInt8](repeating: 0, count: 32), 0x8A91_36AA),
        ([UInt8](repeating: 0xFF, count: 32), 0x62A8_AB43),
        (Array(0..<32), 0x46DD_794E),
        (Array((0..<32).reversed()), 0x113F_DB5C),
        ([], 0),
    ]

    @Test func knownValues() {
        for (bytes, want) in Self.vectors {
            #expect(CRC32C.checksum(bytes) == want, "\(bytes.count) bytes")
            #expect(bytes.withUnsafeBytes { CRC32C.software($0) } == want, "software, \(bytes.count) bytes")
        }
    }

    /// Every length up to 300 bytes at every start offset of a word: the
    /// 8-byte steps and the byte-wise tail agree with the table-driven form.
    @Test func theInstructionAgreesWithTheTablesAtEveryLengthAndAlignment() {
        #if arch(x86_64)
        // Every x86-64 CPU since 2008 has it; without it this test would
        // compare the tables with themselves.
        #expect(CRC32C.hardware, "this CPU has no SSE 4.2 crc32: the instruction's path is not tested here")
        #endif
        var g = SplitMix64(seed: 32)
        let bytes: [UInt8] = (0..<300).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for length in 0...(all.count - start) {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    #expect(CRC32C.checksum(slice) == CRC32C.software(slice), "start \(start), length \(length)")
                }
            }
        }
    }
}
