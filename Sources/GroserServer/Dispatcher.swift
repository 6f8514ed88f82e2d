import GroserSystem
import GroserWire

/// The executors a `Dispatcher` sends requests to besides the catalog
/// reader. In groserd they are the event loop that read the request
/// (watches, Stats) and the worker threads, whose answers come back later;
/// in the fuzz harness and tests, the same rules run on the calling thread.
/// The dispatcher takes them as a generic parameter, so each caller's calls
/// are specialised and inlined: no existential call on the hot path.
public protocol Executors {
    /// Watch, CancelWatch and Stats: answered into `out` now.
    func answerOnLoop(_ request: Request, into out: inout [UInt8])
    /// Sessions, carts, checkout and orders: the session's customer shard.
    /// `.awaiting` when the answer comes later (for `slot`), `.answered`
    /// when it is in `out` already (a refusal, or an executor run inline).
    func runInShard(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                    into out: inout [UInt8]) -> ConnectionStateMachine.Answered
    /// Register and Login: the account workers (password hashing).
    func runInAccountWorkers(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered
    /// Catalog changes (SetProduct): the commit queue.
    func runInCommitQueue(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                          into out: inout [UInt8]) -> ConnectionStateMachine.Answered
    /// Catalog imports and exports: the import thread.
    func runInImportThread(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                           into out: inout [UInt8]) -> ConnectionStateMachine.Answered
}

/// Sends each request to the executor the method registry names
/// (`MethodInfo.executor`), after the checks every request passes once: its
/// id is not the reserved 0, and its deadline has not passed. The event
/// loop, the fuzz harness and the tests all dispatch through it.
public struct Dispatcher: Sendable {
    /// The catalog reader: answers GetStore and the other catalog reads.
    public let handler: RequestHandler

    public init(handler: RequestHandler) { self.handler = handler }

    /// Dispatches the request in a frame the allocation-free reader
    /// declined: read by protobuf-c (`RequestHandler.decode`, which refuses
    /// an operators' method from anyone else), then as `dispatch(_:)`.
    @inline(__always)
    public func dispatch<E: Executors>(frame body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                                       peerIsOperator: () -> Bool, to executors: E,
                                       into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        guard let request = RequestHandler.decode(frame: body, peerIsOperator: peerIsOperator, into: &out) else { return .answered }
        return dispatch(request, receivedAt: receivedAt, slot: slot, to: executors, into: &out)
    }

    /// Answers `request` into `out`, or sends it to a worker whose answer
    /// comes later for `slot` (`.awaiting`).
    @inline(__always)
    public func dispatch<E: Executors>(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, to executors: E,
                                       into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        if request.id == 0 {
            ResponseFrameWriter.appendStatus(id: 0, status: Self.reservedIDRefusal, to: &out)
            return .answered
        }
        if let refusal = Self.deadlineRefusal(request, receivedAt: receivedAt) {
            ResponseFrameWriter.appendStatus(id: request.id, status: refusal, to: &out)
            return .answered
        }
        return send(request, receivedAt: receivedAt, slot: slot, to: executors, into: &out)
    }

    /// A request read while an earlier answer on its connection is still
    /// owed. A worker's request is sent on now (its answer waits its turn
    /// in the connection's machine); the rest are answered when their turn
    /// comes (`dispatch`, which refuses id 0), so a catalog read sees what
    /// an earlier change on the connection did.
    @inline(__always)
    public func hold<E: Executors>(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                                   to executors: E) -> ConnectionStateMachine.HeldAnswer {
        guard request.id != 0, request.method.field?.executor.isDeferred == true else { return .later(request, receivedAt: receivedAt) }
        var frame: [UInt8] = []
        return send(request, receivedAt: receivedAt, slot: slot, to: executors, into: &frame) == .awaiting ? .awaiting : .ready(FrameRun(frame))
    }

    /// The one place a method's executor is read.
    @inline(__always)
    private func send<E: Executors>(_ request: consuming Request, receivedAt: UInt64, slot: UInt64, to executors: E,
                                    into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
        guard let executor = request.method.field?.executor else {
            // An unknown method: the catalog reader's UNIMPLEMENTED.
            handler.answerCatalog(request, into: &out)
            return .answered
        }
        switch executor {
        case .catalogReader:
            handler.answerCatalog(request, into: &out)
            return .answered
        case .eventLoop:
            executors.answerOnLoop(request, into: &out)
            return .answered
        case .customerShard: return executors.runInShard(request, receivedAt: receivedAt, slot: slot, into: &out)
        case .accountWorkers: return executors.runInAccountWorkers(request, receivedAt: receivedAt, slot: slot, into: &out)
        case .commitQueue: return executors.runInCommitQueue(request, receivedAt: receivedAt, slot: slot, into: &out)
        case .importThread: return executors.runInImportThread(request, receivedAt: receivedAt, slot: slot, into: &out)
        }
    }

    /// Id 0 marks frames the server sends unasked; an answer with id 0
    /// could not be told from one. Refused with id 0 (the client sent no other).
    static let reservedIDRefusal = Status(.invalidArgument, "Request ids start at 1; id 0 is reserved for frames the server sends unasked.")

    /// How a deadline refusal reads: the dispatcher and the workers that
    /// take one request at a time state the deadline; the customer shards
    /// and the commit queue, which refuse inside a batch, say only that it passed.
    public enum DeadlineWording: Sendable { case statingTheDeadline, brief }

    /// The refusal of a request whose deadline passed, or nil while it may
    /// still be served. The dispatcher asks before it sends a request
    /// anywhere; a worker that takes it later asks again.
    @inline(__always)
    public static func deadlineRefusal(_ request: borrowing Request, receivedAt: UInt64,
                                       wording: DeadlineWording = .statingTheDeadline) -> Status? {
        guard request.deadlineMilliseconds != 0 else { return nil }
        let elapsed = monotonicNanoseconds() &- receivedAt
        guard elapsed > UInt64(request.deadlineMilliseconds) * 1_000_000 else { return nil }
        switch wording {
        case .statingTheDeadline:
            return Status(.deadlineExceeded, "The request's deadline of \(request.deadlineMilliseconds) ms passed before it was served.")
        case .brief:
            return Status(.deadlineExceeded, "The request's deadline passed before it was served.")
        }
    }
}
