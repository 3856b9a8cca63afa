// The server's threads run on Linux only; the SDK, which shares this target for `LockedValue`,
// also builds on Apple platforms, where `pthread_t` is a pointer and this would not compile.
#if os(Linux)
import Glibc

/// A one-shot timer that is armed only when there is something to wait for, so that a process
/// with nothing to do sleeps instead of waking on a period.
///
/// `arm(afterMilliseconds:)` schedules a firing unless an earlier one is already scheduled; the
/// handler runs once per firing, on the timer's own thread, and re-arms the timer itself if work
/// remains. Arming is cheap (a lock and a comparison), so callers arm on every event that may
/// need a later look.
///
/// Why not a Dispatch timer source: on Linux, once any of them has fired, libdispatch's manager
/// thread wakes every second for good (measured with strace on a bare one-shot source, also after
/// `cancel()`); a thread sleeping on a condition variable costs nothing until it is needed.
package final class DemandTimer: WakeTimer {
    private struct State {
        /// The next firing (monotonic milliseconds); nil when disarmed.
        var deadline: Int64?
        var stopping = false
        var finished = true
    }

    private let state = LockedValue(State())

    package init() {}

    /// Starts the timer's thread; firings go to `handler` (an arm made before takes effect now).
    package func start(_ handler: @escaping @Sendable () -> Void) {
        let started = state.withLock { state -> Bool in
            guard state.finished, !state.stopping else { return false }
            state.finished = false
            return true
        }
        guard started else { return }
        let runner = Runner(timer: self, handler: handler)
        if ServiceThread.start("relay-timer", { runner.run() }) == nil {
            state.withLock { $0.finished = true }
        }
    }

    /// Fires the handler `milliseconds` from now, or earlier if an earlier firing is armed.
    package func arm(afterMilliseconds milliseconds: Int64) {
        let when = Self.now() &+ max(0, milliseconds)
        let changed = state.withLock { state -> Bool in
            if let armed = state.deadline, armed <= when { return false }
            state.deadline = when
            return true
        }
        if changed { state.broadcast() }
    }

    /// Ends the thread; a firing in progress completes first, an armed one is dropped. Call it
    /// from outside the handler.
    package func stop() {
        state.withLock { $0.stopping = true }
        state.broadcast()
        state.withLock(when: { $0.finished }) { _ in }
    }

    private final class Runner: Sendable {
        let timer: DemandTimer
        let handler: @Sendable () -> Void

        init(timer: DemandTimer, handler: @escaping @Sendable () -> Void) {
            self.timer = timer
            self.handler = handler
        }

        func run() {
            let state = timer.state
            // Sleep until armed; then until the deadline, looking again when an earlier arm or a
            // stop changes it.
            while let deadline = state.withLock(
                when: { $0.stopping || $0.deadline != nil }, { $0.stopping ? nil : $0.deadline })
            {
                let wait = deadline - DemandTimer.now()
                if wait > 0 {
                    state.withLock(when: { $0.stopping || $0.deadline != deadline }, waitingAtMost: wait) { _ in }
                    continue
                }
                let due = state.withLock { state -> Bool in
                    guard !state.stopping, state.deadline == deadline else { return false }
                    state.deadline = nil
                    return true
                }
                if due { handler() }
            }
            state.withLock { $0.finished = true }
            state.broadcast()
        }
    }

    /// Monotonic milliseconds (the clock the timer's deadlines are on).
    package static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}
#endif
