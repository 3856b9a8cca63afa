import Foundation
import RelayLocks

/// A fixed set of threads running blocking work (host-name resolution) from one queue: a slow
/// resolver ties up one thread, never the scheduler.
package final class WorkerPool: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var stopping = false
    }

    private let state = LockedValue(State())

    package init(threads: Int, name: String) {
        for index in 0..<max(1, threads) {
            ServiceThread.start("\(name)-\(index)", stackSize: 256 * 1024) { [self] in run() }
        }
    }

    package func submit(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.append(work) }
        state.signal()
    }

    /// Lets the threads finish their current work and end; queued work is dropped.
    package func stop() {
        state.withLock { state in
            state.stopping = true
            state.queue.removeAll()
        }
        state.broadcast()
    }

    private func run() {
        while true {
            let work = state.withLock(when: { !$0.queue.isEmpty || $0.stopping }) { state in
                state.stopping ? nil : state.queue.removeFirst()
            }
            guard let work else { return }
            work()
        }
    }
}
