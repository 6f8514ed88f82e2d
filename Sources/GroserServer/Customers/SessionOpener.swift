import Glibc
import GroserStorage
import GroserSystem
import GroserWire

/// OpenSession, answered without a shard: the caller's uid is admitted by
/// the per-uid limit (groserd's own uid and root are not limited), and the answer is a new token (SessionTokens) that
/// nothing stores. Shared by the event loops (one lock, held briefly).
final class SessionOpener: Sendable {
    let tokens: SessionTokens
    let limits: SessionLimits
    private let limiter: Locked<OpenSessionLimiter>
    private let unixTime: @Sendable () -> Int64
    private let monotonic: @Sendable () -> UInt64

    init(tokens: SessionTokens, limits: SessionLimits, unixTime: @escaping @Sendable () -> Int64,
         monotonic: @escaping @Sendable () -> UInt64 = monotonicNanoseconds) {
        self.tokens = tokens
        self.limits = limits
        limiter = Locked(OpenSessionLimiter(limits, exempt: [0, getuid()]))
        self.unixTime = unixTime
        self.monotonic = monotonic
    }

    /// OpenSession's answer for `caller`: a token, or RESOURCE_EXHAUSTED
    /// when the caller's uid opened too many sessions too fast.
    func open(_ caller: Caller) -> CommerceOutcome {
        let now = monotonic()
        guard limiter.withLock({ $0.admit(uid: caller.uid, nowNanoseconds: now) }) else {
            return .failed(Status(.resourceExhausted, "This user opened more than \(limits.openBurst) sessions at once or \(limits.opensPerSecond) a second (--session-open-rate); reuse a session, or wait a moment and try again."))
        }
        do {
            return .ok(.openSession, BodyEncoder.openSession(try tokens.mint(nowUnix: unixTime())))
        } catch {
            return .failed(error.status)
        }
    }

    /// Answers an OpenSession job at once.
    func answer(_ job: borrowing CommerceJob) {
        var frame: [UInt8] = []
        switch open(job.caller) {
        case .ok(let field, let body): frame = ResponseFrameWriter.okFrame(id: job.request.id, field: field, body: body)
        case .failed(let status): ResponseFrameWriter.appendStatus(id: job.request.id, status: status, to: &frame)
        }
        job.reply(frame)
    }
}
