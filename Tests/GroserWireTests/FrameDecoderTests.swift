import GroserWire
import GroserSystem
import Testing

/// Bodies of assorted sizes (empty, one byte, around the varint and buffer
/// boundaries, and one larger than the decoder's initial capacity).
private let sampleBodies: [[UInt8]] = [0, 1, 2, 3, 4, 5, 127, 128, 300, 0, 4095, 4096, 4097, 20_000, 1]
    .enumerated().map { index, size in patternBytes(count: size, seed: UInt64(index) + 1) }

private let sampleStream: [UInt8] = sampleBodies.flatMap { Framing.frame($0) }

@Suite("FrameDecoder")
struct FrameDecoderTests {
    @Test func framingWritesABigEndianLengthPrefix() {
        #expect(Framing.frame([0xAA, 0xBB]) == [0, 0, 0, 2, 0xAA, 0xBB])
        #expect(Framing.frame([UInt8]()) == [0, 0, 0, 0])
        var header: [UInt8] = [9]
        Framing.appendHeader(length: 0x0102_0304, to: &header)
        #expect(header == [9, 1, 2, 3, 4])
        #expect(Framing.headerSize == 4)
        #expect(Framing.defaultMaximumFrameBytes == 4_194_304)
    }

    @Test func severalFramesFedAtOnceComeOutInOrder() throws {
        var decoder = FrameDecoder()
        decoder.append(sampleStream)
        #expect(decoder.bufferedByteCount == sampleStream.count)
        let frames = try decoder.drain()
        #expect(frames == sampleBodies)
        #expect(decoder.bufferedByteCount == 0)
        #expect(try decoder.next() == nil)
    }

    @Test func framesFedByteByByteComeOutIdentical() throws {
        var decoder = FrameDecoder(initialCapacity: 8)
        var frames: [[UInt8]] = []
        for byte in sampleStream {
            decoder.append(CollectionOfOne(byte))
            frames += try decoder.drain()
        }
        #expect(frames == sampleBodies)
        #expect(decoder.bufferedByteCount == 0)
    }

    /// Random chunk sizes, and frames taken out only now and then, so unread
    /// bytes are moved to the front and the buffer grows while frames are pending.
    @Test(arguments: 0..<200)
    func framesFedInRandomSplitsComeOutIdentical(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 7919 &+ 17)
        let capacity = [1, 7, 64, 4096, 16 * 1024].randomElement(using: &rng)!
        var decoder = FrameDecoder(initialCapacity: capacity)
        var frames: [[UInt8]] = []
        var offset = 0
        while offset < sampleStream.count {
            let maxChunk = Int.random(in: 1...6, using: &rng) == 1 ? 30_000 : 600
            let chunk = min(Int.random(in: 1...maxChunk, using: &rng), sampleStream.count - offset)
            decoder.append(sampleStream[offset..<(offset + chunk)])
            offset += chunk
            if Bool.random(using: &rng) { frames += try decoder.drain() }
        }
        frames += try decoder.drain()
        #expect(frames == sampleBodies, "seed \(seed), initial capacity \(capacity)")
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func anEmptyBodyIsAFrame() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 0])
        let body = try #require(try decoder.next())
        #expect(body.isEmpty)
        #expect(decoder.bufferedByteCount == 0)
        #expect(try decoder.next() == nil)

        decoder.append(Framing.frame([UInt8]()) + Framing.frame([7]) + Framing.frame([UInt8]()))
        #expect(try decoder.drain() == [[], [7], []])
    }

    @Test(arguments: [0, 1, 1024, 65_536])
    func aFrameExactlyAtTheMaximumIsAccepted(maximum: Int) throws {
        var decoder = FrameDecoder(maximumFrameBytes: maximum)
        let body = patternBytes(count: maximum, seed: 99)
        decoder.append(Framing.frame(body))
        #expect(try decoder.drain() == [body])
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func aFrameAtTheDefaultMaximumIsAccepted() throws {
        var decoder = FrameDecoder()
        let body = patternBytes(count: Framing.defaultMaximumFrameBytes, seed: 5)
        decoder.append(Framing.frame(body))
        #expect(try decoder.drain() == [body])
    }

    @Test(arguments: [0, 1, 1024, Framing.defaultMaximumFrameBytes])
    func oneByteOverTheMaximumThrowsAsSoonAsTheHeaderIsIn(maximum: Int) throws {
        var decoder = FrameDecoder(maximumFrameBytes: maximum)
        var header: [UInt8] = []
        Framing.appendHeader(length: maximum + 1, to: &header)
        // Three header bytes are not enough to judge: just "need more".
        decoder.append(header.prefix(3))
        #expect(try decoder.next() == nil)
        // The fourth completes the header; no body byte has arrived.
        decoder.append(header.suffix(1))
        #expect(throws: FrameError.frameTooLarge(length: UInt32(maximum + 1), maximum: maximum)) {
            _ = try decoder.next()
        }
        // The stream cannot be resynchronised: asking again fails again.
        #expect(throws: FrameError.frameTooLarge(length: UInt32(maximum + 1), maximum: maximum)) {
            _ = try decoder.next()
        }
    }

    @Test func aHeaderAnnouncingFourGiBIsRejectedWithoutItsBody() throws {
        var decoder = FrameDecoder()
        decoder.append([0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FrameError.frameTooLarge(length: UInt32.max, maximum: Framing.defaultMaximumFrameBytes)) {
            _ = try decoder.next()
        }
        #expect(decoder.bufferedByteCount == 4)
    }

    @Test func anOversizedFrameAfterGoodOnesFailsOnlyWhenReached() throws {
        var decoder = FrameDecoder(maximumFrameBytes: 16)
        decoder.append(Framing.frame([1, 2]) + Framing.frame([3]) + [0, 0, 0, 17])
        #expect(try decoder.next().map(Array.init) == [1, 2])
        #expect(try decoder.next().map(Array.init) == [3])
        #expect(throws: FrameError.frameTooLarge(length: 17, maximum: 16)) { _ = try decoder.next() }
    }

    @Test func truncatedInputWaitsForMoreAndCountsItsBytes() throws {
        var decoder = FrameDecoder()
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)

        let body = Array("молоко 3,2%".utf8)
        let frame = Framing.frame(body)
        decoder.append(frame.prefix(2))              // half a header
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 2)
        decoder.append(frame[2..<4])                 // header only
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 4)
        decoder.append(frame[4..<9])                 // partial body
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 9)
        decoder.append(frame[9...])
        #expect(try decoder.next().map(Array.init) == body)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func aPartialFrameStaysBufferedBehindAWholeOne() throws {
        var decoder = FrameDecoder()
        let first = Framing.frame([1, 2, 3])
        let second = Framing.frame([4, 5, 6, 7])
        decoder.append(first + second.prefix(5))
        #expect(try decoder.next().map(Array.init) == [1, 2, 3])
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 5)
        decoder.append(second.dropFirst(5))
        #expect(try decoder.next().map(Array.init) == [4, 5, 6, 7])
        #expect(decoder.bufferedByteCount == 0)
    }

    /// A frame over 1 MiB grows the buffer, which is given back once the frame
    /// is taken; the frame itself and later frames must still be intact.
    @Test func theDecoderKeepsWorkingAfterALargeFrame() throws {
        var decoder = FrameDecoder()
        let large = patternBytes(count: 3 * 1024 * 1024 + 5, seed: 42)
        let stream = Framing.frame(large)
        var offset = 0
        var got: [[UInt8]] = []
        while offset < stream.count {
            let chunk = min(65_536, stream.count - offset)
            decoder.append(stream[offset..<(offset + chunk)])
            offset += chunk
            got += try decoder.drain()
        }
        #expect(got.count == 1)
        #expect(got.first == large)
        #expect(decoder.bufferedByteCount == 0)

        // Smaller frames afterwards, including one that straddles two appends.
        let later = (0..<50).map { patternBytes(count: $0 * 37, seed: UInt64(1000 + $0)) }
        let laterStream = later.flatMap { Framing.frame($0) }
        decoder.append(laterStream.prefix(1000))
        var frames = try decoder.drain()
        decoder.append(laterStream.dropFirst(1000))
        frames += try decoder.drain()
        #expect(frames == later)

        // And another large one in the same append as a small one.
        decoder.append(Framing.frame([9]) + Framing.frame(large) + Framing.frame([8]))
        #expect(try decoder.drain() == [[9], large, [8]])
    }

    @Test func theBodyOfTheFrameThatShrinksTheBufferIsIntact() throws {
        var decoder = FrameDecoder()
        let large = patternBytes(count: 2 * 1024 * 1024, seed: 7)
        decoder.append(Framing.frame(large))
        // Taking the only frame empties the buffer and triggers the shrink.
        let body = try #require(try decoder.next())
        #expect(Array(body) == large)
        decoder.append(Framing.frame([1, 2, 3]))
        #expect(try decoder.next().map(Array.init) == [1, 2, 3])
    }

    @Test func bytesWrittenThroughWriteTailAreDecoded() throws {
        var decoder = FrameDecoder(initialCapacity: 16)
        var source = sampleStream[...]
        var frames: [[UInt8]] = []
        var rng = SplitMix64(seed: 2024)
        while !source.isEmpty {
            let capacity = Int.random(in: 1...5000, using: &rng)
            // Like read(2): writes at most `capacity` bytes, maybe fewer.
            let written = decoder.writeTail(capacity: capacity) { raw in
                let n = min(raw.count, source.count, Int.random(in: 1...capacity, using: &rng))
                #expect(raw.count == capacity)
                for i in 0..<n { raw[i] = source[source.startIndex + i] }
                return n
            }
            source = source.dropFirst(written)
            frames += try decoder.drain()
        }
        #expect(frames == sampleBodies)
        #expect(decoder.bufferedByteCount == 0)
    }

    /// A reader may mix both ways of feeding a decoder: room that
    /// `writeTail` prepared and left unused is later filled by `append`.
    @Test(arguments: 0..<100)
    func appendAndWriteTailInterleavedComeOutIdentical(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &+ 777)
        let bodies = (0..<40).map { i in
            patternBytes(count: Bool.random(using: &rng) ? Int.random(in: 0...300, using: &rng) : Int.random(in: 0...200_000, using: &rng),
                         seed: UInt64(seed * 100 + i))
        }
        let stream = bodies.flatMap { Framing.frame($0) }
        var decoder = FrameDecoder(initialCapacity: [0, 16, 16 * 1024].randomElement(using: &rng)!)
        var source = stream[...]
        var frames: [[UInt8]] = []
        while !source.isEmpty {
            if Bool.random(using: &rng) {
                let n = min(Int.random(in: 1...70_000, using: &rng), source.count)
                decoder.append(source.prefix(n))
                source = source.dropFirst(n)
            } else {
                let capacity = Int.random(in: 1...70_000, using: &rng)
                let written = decoder.writeTail(capacity: capacity) { raw in
                    let n = min(raw.count, source.count, Int.random(in: 0...capacity, using: &rng))
                    raw.copyBytes(from: source.prefix(n))
                    return n
                }
                source = source.dropFirst(written)
            }
            if Int.random(in: 0..<3, using: &rng) == 0 { frames += try decoder.drain() }
        }
        frames += try decoder.drain()
        #expect(frames == bodies, "seed \(seed)")
        #expect(decoder.bufferedByteCount == 0)
    }

    private struct ReadFailed: Error, Equatable {}

    @Test func writeTailThatWritesNothingOrThrowsLeavesTheBufferAlone() throws {
        var decoder = FrameDecoder()
        let frame = Framing.frame([1, 2, 3, 4])
        decoder.append(frame.prefix(6))
        // End of file: nothing written.
        let written = decoder.writeTail(capacity: 100) { _ in 0 }
        #expect(written == 0)
        #expect(decoder.bufferedByteCount == 6)
        // A failed read: the error comes through, the buffered bytes stay.
        #expect(throws: ReadFailed()) {
            _ = try decoder.writeTail(capacity: 100) { (raw: UnsafeMutableRawBufferPointer) throws(ReadFailed) -> Int in
                raw[0] = 0xEE
                throw ReadFailed()
            }
        }
        #expect(decoder.bufferedByteCount == 6)
        decoder.append(frame.dropFirst(6))
        #expect(try decoder.next().map(Array.init) == [1, 2, 3, 4])
    }

    // MARK: Memory held by an unfinished frame

    /// What a server holds for a client that sends 4 MiB − 1 bytes of a
    /// 4 MiB frame, read by read: the frame's own size (it was 8 MiB, the
    /// array's own doubling on top of the decoder's).
    @Test func anUnfinishedFrameAtTheMaximumHoldsItsOwnSize() throws {
        var decoder = FrameDecoder(initialCapacity: 0)
        let length = Framing.defaultMaximumFrameBytes
        let stream = Framing.frame(patternBytes(count: length, seed: 11))
        var offset = 0
        while offset < stream.count - 1 {
            let chunk = min(65_536, stream.count - 1 - offset)
            decoder.append(stream[offset..<(offset + chunk)])
            offset += chunk
            #expect(try decoder.next() == nil)
        }
        #expect(decoder.bufferedByteCount == stream.count - 1)
        #expect(decoder.announcedBodyLength == length)
        // (The allocator may round up to its page.)
        #expect(decoder.storageByteCount >= Framing.headerSize + length)
        #expect(decoder.storageByteCount <= Framing.headerSize + length + 4096)
        decoder.append(stream.suffix(1))
        #expect(try decoder.next()?.count == length)
    }

    @Test func aHeaderAnnouncingALargeFrameReservesLittle() throws {
        var decoder = FrameDecoder(initialCapacity: 0)
        var bytes: [UInt8] = []
        Framing.appendHeader(length: Framing.defaultMaximumFrameBytes, to: &bytes)
        decoder.append(bytes + [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        #expect(try decoder.next() == nil)
        #expect(decoder.storageByteCount <= 8192)
    }

    /// While one frame arrives in random chunks, its buffer never holds more
    /// than the frame, nor more than 2.5 times what has arrived (at least
    /// 5 KiB): memory follows the bytes a client really sent.
    @Test(arguments: 0..<50)
    func anArrivingFrameHoldsAtMostItsSizeAndAboutTwiceItsBytes(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 104_729 &+ 3)
        let length = Int.random(in: 16_384...Framing.defaultMaximumFrameBytes, using: &rng)
        let body = patternBytes(count: length, seed: UInt64(seed))
        let stream = Framing.frame(body)
        var decoder = FrameDecoder(initialCapacity: 0)
        var offset = 0
        var frames: [[UInt8]] = []
        while offset < stream.count {
            let maxChunk = Bool.random(using: &rng) ? 65_536 : 3_000
            let chunk = min(Int.random(in: Framing.headerSize...maxChunk, using: &rng), stream.count - offset)
            decoder.append(stream[offset..<(offset + chunk)])
            offset += chunk
            if offset < stream.count {
                let held = decoder.storageByteCount
                #expect(held <= stream.count + 4096, "seed \(seed): \(held) bytes held for a \(stream.count)-byte frame")
                #expect(held <= max(5 * 1024, decoder.bufferedByteCount * 5 / 2) + 4096,
                        "seed \(seed): \(held) bytes held for \(decoder.bufferedByteCount) received")
            }
            frames += try decoder.drain()
        }
        #expect(frames == [body])
    }

    @Test func removeAllDropsEverythingAndTheDecoderGoesOn() throws {
        var decoder = FrameDecoder(initialCapacity: 0)
        decoder.append(Framing.frame([1, 2, 3]) + Framing.frame(patternBytes(count: 50_000, seed: 1)).prefix(30_000))
        #expect(decoder.storageByteCount > 0)
        decoder.removeAll()
        #expect(decoder.bufferedByteCount == 0)
        #expect(decoder.storageByteCount == 0)
        #expect(decoder.announcedBodyLength == nil)
        decoder.append(Framing.frame([4]))
        #expect(try decoder.drain() == [[4]])
    }
}
