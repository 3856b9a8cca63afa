import Foundation

/// A fixed set of threads running blocking work (webhook deliveries) from one queue: a slow
/// receiver ties up one thread, never the scheduler.
///
/// `@unchecked Sendable`: `queue` and `stopping` are only touched under `condition`.
package final class WorkerPool: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var stopping = false

    package init(threads: Int, name: String) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [self] in run() }
            thread.name = "\(name)-\(index)"
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }

    package func submit(_ work: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.append(work)
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads finish their current work and end; queued work is dropped.
    package func stop() {
        condition.lock()
        stopping = true
        queue.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty && !stopping { condition.wait() }
            if stopping {
                condition.unlock()
                return
            }
            let work = queue.removeFirst()
            condition.unlock()
            work()
        }
    }
}
