import Foundation

/// Time for the client's waits, injectable so that tests check the reconnect schedule without
/// waiting for it.
public protocol RelayClientClock: Sendable {
    /// Seconds on a monotonic clock.
    func now() -> Double
    /// Sleeps; throws `CancellationError` when the task is cancelled.
    func sleep(seconds: Double) async throws
}

/// The real clock: uptime and `Task.sleep`.
public struct SystemClock: RelayClientClock {
    /// The system clock.
    public init() {}
    /// Seconds since boot.
    public func now() -> Double { ProcessInfo.processInfo.systemUptime }
    /// `Task.sleep` for `seconds`.
    public func sleep(seconds: Double) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }
}
