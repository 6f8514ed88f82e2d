import CLinux

/// CRC-32C (Castagnoli), the checksum of every customer-log record: with
/// SSE 4.2's crc32 instruction where the CPU has it (a cart record's
/// checksum fell from about 500 instructions to 40), else slicing by 8,
/// about 1 GB/s here. `CRC32CTests` checks both against known values.
enum CRC32C {
    static let hardware = groser_has_crc32c() != 0

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard hardware, let base = bytes.baseAddress else { return software(bytes) }
        return groser_crc32c_update(0xFFFF_FFFF, base.assumingMemoryBound(to: UInt8.self), bytes.count) ^ 0xFFFF_FFFF
    }

    private static let tables: [[UInt32]] = {
        var t = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[0][i] = c
        }
        for i in 0..<256 {
            for k in 1..<8 { t[k][i] = (t[k - 1][i] >> 8) ^ t[0][Int(t[k - 1][i] & 0xff)] }
        }
        return t
    }()

    /// Slicing by 8, for CPUs without the instruction.
    static func software(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        let t = tables
        var i = 0
        let n = bytes.count
        t[0].withUnsafeBufferPointer { t0 in t[1].withUnsafeBufferPointer { t1 in t[2].withUnsafeBufferPointer { t2 in
        t[3].withUnsafeBufferPointer { t3 in t[4].withUnsafeBufferPointer { t4 in t[5].withUnsafeBufferPointer { t5 in
        t[6].withUnsafeBufferPointer { t6 in t[7].withUnsafeBufferPointer { t7 in
            while i + 8 <= n {
                let lo = bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian ^ crc
                let hi = bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self).littleEndian
                crc = t7[Int(lo & 0xff)] ^ t6[Int((lo >> 8) & 0xff)] ^ t5[Int((lo >> 16) & 0xff)] ^ t4[Int(lo >> 24)]
                    ^ t3[Int(hi & 0xff)] ^ t2[Int((hi >> 8) & 0xff)] ^ t1[Int((hi >> 16) & 0xff)] ^ t0[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                crc = t0[Int((crc ^ UInt32(bytes[i])) & 0xff)] ^ (crc >> 8)
                i += 1
            }
        }}}}}}}}
        return crc ^ 0xFFFF_FFFF
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { checksum($0) } }
}
