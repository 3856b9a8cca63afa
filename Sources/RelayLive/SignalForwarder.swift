package import RelayCore
import RelayLocks
package import RelayTelemetry

/// Hands clients' signals to the chat server (`signal.received`, one attempt) within the
/// budgets of `SignalAdmission`, and counts what became of each in `pushrelay_signals_total`.
package final class SignalForwarder: Sendable {
    private let admission: LockedValue<SignalAdmission>
    private let metrics: Metrics
    private let now: @Sendable () -> Timestamp
    /// Posts the event; calls back once, with whether the receiver took it.
    private let send: @Sendable (RelayEvent, @escaping @Sendable (Bool) -> Void) -> Void

    package init(
        maxInFlight: Int, metrics: Metrics, now: @escaping @Sendable () -> Timestamp,
        send: @escaping @Sendable (RelayEvent, @escaping @Sendable (Bool) -> Void) -> Void
    ) {
        admission = LockedValue(SignalAdmission(maxInFlight: maxInFlight))
        self.metrics = metrics
        self.now = now
        self.send = send
    }

    /// A client of `userId` sent a signal; `event` builds what goes out (only when it does).
    func forward(userId: String, _ event: (Timestamp) -> RelayEvent) {
        let time = now()
        metrics.recordSignal(.received)
        switch admission.withLock({ $0.admit(userId: userId, now: time) }) {
        case .rateLimited: metrics.recordSignal(.rateLimited)
        case .busy: metrics.recordSignal(.dropped)
        case .forward:
            send(event(time)) { [admission, metrics] taken in
                admission.withLock { $0.finished() }
                metrics.recordSignal(taken ? .forwarded : .notForwarded)
            }
        }
    }
}
