import GroserSystem
import GroserWire

/// The event loop's side of a connection's frames, one struct per turn.
extension EventLoop {
    /// The loop's side of a connection's frames: the dispatcher, and the
    /// executors it sends requests to (the watch code and the stats on this
    /// loop, the workers through the inbox). The machine decides when and
    /// in which order; this answers.
    struct LoopResponder: FrameResponder, Executors {
        // Both outlive every call: the loop owns the connection while it serves it.
        unowned(unsafe) let loop: EventLoop
        unowned(unsafe) let connection: Connection
        let dispatcher: Dispatcher

        /// The common methods are read without protobuf-c, whose unpack
        /// allocates every message and string; anything else goes through it.
        @inline(__always)
        mutating func answer(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64,
                             into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let start = out.count
            let answered: ConnectionStateMachine.Answered
            let method: MethodField?
            if let request = Request.decodeCommonMethod(body, reusing: &connection.repeatedStrings) {
                method = request.method.field
                answered = dispatcher.dispatch(request, receivedAt: receivedAt, slot: slot, to: self, into: &out)
            } else {
                method = Request.methodField(of: body)
                answered = dispatcher.dispatch(frame: body, receivedAt: receivedAt, slot: slot, peerIsOperator: isOperator,
                                               to: self, into: &out)
            }
            if out.count > start {
                out.withUnsafeBytes { loop.record(connection, method, UnsafeRawBufferPointer(rebasing: $0[start...]), receivedAt: receivedAt) }
            }
            return answered
        }

        mutating func hold(_ body: UnsafeRawBufferPointer, receivedAt: UInt64, slot: UInt64) -> ConnectionStateMachine.HeldAnswer {
            var frame: [UInt8] = []
            guard let request = Request.decodeCommonMethod(body, reusing: &connection.repeatedStrings)
                    ?? RequestHandler.decode(frame: body, peerIsOperator: isOperator, into: &frame) else { return .ready(FrameRun(frame)) }
            return dispatcher.hold(request, receivedAt: receivedAt, slot: slot, to: self)
        }

        /// Asked only for a frame naming an operators' method.
        func isOperator() -> Bool { connection.isOperator(by: loop.admission.isOperator) }

        mutating func answer(held request: Request, receivedAt: UInt64, into out: inout [UInt8]) {
            let start = out.count
            // Held requests are the ones no worker answers: answered now.
            _ = dispatcher.dispatch(request, receivedAt: receivedAt, slot: 0, to: self, into: &out)
            out.withUnsafeBytes { loop.record(connection, request.method.field, UnsafeRawBufferPointer(rebasing: $0[start...]), receivedAt: receivedAt) }
        }

        /// Watch, CancelWatch and Stats, in the connection's answer order.
        func answerOnLoop(_ request: Request, into out: inout [UInt8]) {
            switch request.method {
            case .watch(let selector, let since):
                loop.fanOut.start(request, selector: selector, since: since, on: connection, catalog: loop.service.current,
                                  hub: loop.watches, counters: loop.counters, into: &out)
            case .cancelWatch(let watchID):
                loop.fanOut.cancel(request, watchID: watchID, on: connection, counters: loop.counters, into: &out)
            case .stats:
                let stats = StatsSnapshot.make(catalog: loop.service.current, startedAt: loop.service.startedAt, now: monotonicNanoseconds(),
                                               counters: loop.counters, admission: loop.admission)
                ResponseFrameWriter.appendOK(id: request.id, field: .stats, body: BodyEncoder.stats(stats), to: &out)
            default:
                ResponseFrameWriter.appendStatus(id: request.id, status: Status(.internal, "groserd routed a request to the wrong place."),
                                                 to: &out)
            }
        }

        func runInShard(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                        into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.customers.submit(job(request, receivedAt, slot), sessionKeys: &connection.sessionKeys), id, &out)
        }

        func runInAccountWorkers(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                                 into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.customers.accounts.submit(job(request, receivedAt, slot)), id, &out)
        }

        func runInCommitQueue(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                              into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.commits.submit(job(request, receivedAt, slot)), id, &out)
        }

        func runInImportThread(_ request: consuming Request, receivedAt: UInt64, slot: UInt64,
                               into out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            let id = request.id
            return accepted(loop.workers.imports.submit(job(request, receivedAt, slot)), id, &out)
        }

        /// The job that carries `request` to a worker; its answer returns
        /// through the loop's inbox for `slot`. The request is moved, not
        /// copied (a copy of the job, its request's strings, showed in the profile).
        @inline(__always)
        private func job(_ request: consuming Request, _ receivedAt: UInt64, _ slot: UInt64) -> CommerceJob {
            let reply = loop.inbox.reply(fd: connection.socket.descriptor, serial: connection.serial, slot: slot,
                                         method: request.method.field, receivedAt: receivedAt)
            return CommerceJob(request: request, caller: Caller(uid: connection.peer?.uid, gid: connection.peer?.gid),
                               receivedAt: receivedAt, reply: reply, connection: connection.token)
        }

        /// `.awaiting` when a worker took the request; else UNAVAILABLE in
        /// `out`: the worker takes no more (groserd is stopping).
        @inline(__always)
        private func accepted(_ taken: Bool, _ id: UInt64, _ out: inout [UInt8]) -> ConnectionStateMachine.Answered {
            guard taken else {
                ResponseFrameWriter.appendStatus(id: id, status: Status(.unavailable, "groserd is shutting down."), to: &out)
                return .answered
            }
            return .awaiting
        }
    }
}
