import CGroserProto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CProtobufC

// protobuf-c memory: the `Arena` every conversion builds C structs in, and
// the helpers they read C with. Encoding builds C structs in an `Arena` freed
// before returning; decoding unpacks, copies into Swift values and frees in a
// `defer` in the same scope. The plain messages' conversions are generated
// (Generated/ProtobufCMessages.swift, tools/gen-wire-swift); every
// ProtobufC*.swift file converts the rest of its area's messages the same
// way, and no C pointer leaves their functions (ProtoReflection, which reads the
// descriptors, and RequestFieldCount, which walks them, import CGroserProto too).

/// Owns every C allocation of one encode; frees them all at the end.
final class Arena {
    private var blocks: [UnsafeMutableRawPointer] = []

    deinit { for b in blocks { free(b) } }

    func message<T>(_ type: T.Type, _ initialize: (UnsafeMutablePointer<T>) -> Void) -> UnsafeMutablePointer<T> {
        let raw = calloc(1, MemoryLayout<T>.stride)!
        blocks.append(raw)
        let p = raw.bindMemory(to: T.self, capacity: 1)
        initialize(p)
        return p
    }

    /// `body` with `p`, one of this arena's messages, as a ProtobufCMessage.
    /// The arena (every string and submessage `p` points to) lives at least
    /// until `body` returns.
    func withMessage<T, R>(_ p: UnsafeMutablePointer<T>, _ body: (UnsafePointer<ProtobufCMessage>) -> R) -> R {
        withExtendedLifetime(self) {
            UnsafeRawPointer(p).withMemoryRebound(to: ProtobufCMessage.self, capacity: 1) { body($0) }
        }
    }

    func string(_ s: String) -> UnsafeMutablePointer<CChar> {
        let p = strdup(s)!
        blocks.append(UnsafeMutableRawPointer(p))
        return p
    }

    func array<T>(_ items: [T]) -> UnsafeMutablePointer<T?> where T: _Pointer {
        let raw = calloc(max(items.count, 1), MemoryLayout<T?>.stride)!
        blocks.append(raw)
        let p = raw.bindMemory(to: T?.self, capacity: max(items.count, 1))
        for (i, item) in items.enumerated() { p[i] = item }
        return p
    }
}

extension Arena {
    /// The encoding of the message `build` makes in a new arena.
    static func packed<T>(_ build: (Arena) -> UnsafeMutablePointer<T>) -> [UInt8] {
        let arena = Arena()
        return arena.withMessage(build(arena), pack)
    }
}

func pack(_ message: UnsafePointer<ProtobufCMessage>) -> [UInt8] {
    let size = protobuf_c_message_get_packed_size(message)
    return [UInt8](unsafeUninitializedCapacity: max(size, 1)) { buffer, count in
        count = protobuf_c_message_pack(message, buffer.baseAddress!)
    }
}


func str(_ p: UnsafeMutablePointer<CChar>?) -> String {
    guard let p else { return "" }
    return String(cString: p)
}

func items<T>(_ p: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ n: Int) -> [UnsafeMutablePointer<T>] {
    guard let p, n > 0 else { return [] }
    return (0..<n).compactMap { p[$0] }
}
