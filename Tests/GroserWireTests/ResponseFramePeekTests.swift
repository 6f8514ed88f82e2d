import GroserWire
import Testing

@Suite("reading an answer's id and status, and a request's method, without decoding")
struct ResponseFramePeekTests {
    private func peek(_ frame: [UInt8]) -> (UInt64, StatusCode) {
        frame.withUnsafeBytes { ResponseFramePeek.idAndStatus($0) }
    }

    @Test func okErrorAndStreamFrames() {
        #expect(peek(Response(id: 9, body: .logout).encodedFrame()) == (9, .ok))
        #expect(peek(Response(id: 300, status: Status(.notFound, "no")).encodedFrame()) == (300, .notFound))
        #expect(peek(Response(id: 0, status: Status(.invalidArgument, "bad")).encodedFrame()) == (0, .invalidArgument))
        var stream: [UInt8] = []
        ResponseFrameWriter.appendStreamFrame(id: 5, field: .watch, body: UnsafeRawBufferPointer(start: nil, count: 0),
                                              continues: true, to: &stream)
        #expect(peek(stream) == (5, .ok))
        let decoded = try? Response.decode(stream.dropFirst(Framing.headerSize))
        #expect(decoded?.continues == true && decoded?.id == 5)
    }

    @Test func theLastOfSeveralFramesIsTheAnswerCounted() {
        // A CancelWatch's two frames: the watch's end, then its own OK.
        var frames = Response(id: 3, status: Status(.cancelled, "The watch was cancelled.")).encodedFrame()
        frames += Response(id: 8, body: .logout).encodedFrame()
        #expect(frames.withUnsafeBytes { ResponseFramePeek.lastIDAndStatus($0) } == (8, .ok))
        let one = Response(id: 8, status: Status(.notFound, "No watch")).encodedFrame()
        #expect(one.withUnsafeBytes { ResponseFramePeek.lastIDAndStatus($0) } == (8, .notFound))
    }

    @Test func theMethodOfARequest() {
        for method: RequestMethod in [.serverInfo, .stats, .watch(selector: .cityCode("SPB"), sinceVersion: 3),
                                      .cancelWatch(watchID: 1), .getShelf(shelfUID: "x")] {
            let body = Request(id: 4, deadlineMilliseconds: 100, method: method).encoded()
            #expect(body.withUnsafeBytes { Request.methodField(of: $0) } == method.field)
        }
        // Field 99: no method this build knows.
        let unknown: [UInt8] = [0x08, 77, 0x9A, 0x06, 0x00]
        #expect(unknown.withUnsafeBytes { Request.methodField(of: $0) } == nil)
    }
}
