import CGroserProto
import CProtobufC

// The watch and stats conversions that are not generated: StatusCount (a
// code and its name) and a watch frame's body. Like ProtobufC.swift, no C
// pointer leaves this file's functions.

extension Arena {
    /// StatusCount carries the code's name beside its number (for readers
    /// without the enum), so it is written by hand.
    func statusCount(_ v: StatusCount) -> UnsafeMutablePointer<Groser__V1__StatusCount> {
        message(Groser__V1__StatusCount.self) { g in
            groser__v1__status_count__init(g)
            g.pointee.code = UInt32(bitPattern: v.code.rawValue)
            g.pointee.count = v.count
            g.pointee.name = string(v.code.description)
        }
    }
}

extension StatusCount {
    init(_ p: UnsafeMutablePointer<Groser__V1__StatusCount>?) {
        let c = p?.pointee ?? Groser__V1__StatusCount()
        self.init(code: StatusCode(rawValue: Int32(bitPattern: c.code)), count: c.count)
    }
}

extension BodyEncoder {
    /// A WatchEvent's encoding.
    public static func watchEvent(_ v: WatchEvent) -> [UInt8] { Arena.packed { $0.watchEvent(v) } }
}
