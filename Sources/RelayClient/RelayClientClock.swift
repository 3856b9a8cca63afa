import Foundation

/// Time for the client's waits, injectable so that tests check the reconnect schedule without
/// waiting for it.
public protocol RelayClientClock: Sendable {
    /// Seconds on a monotonic clock.
    func now() -> Double
    /// Sleeps; throws `CancellationError` when the task is cancelled.
    func sleep(seconds: Double) async throws
}

public struct SystemClock: RelayClientClock {
    public init() {}
    public func now() -> Double { ProcessInfo.processInfo.systemUptime }
    public func sleep(seconds: Double) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }
}
