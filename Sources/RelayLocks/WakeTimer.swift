/// What a scheduler sleeps on between passes: armed for its next look, firing its handler once per
/// arm. `DemandTimer` is the server's; a test steps one of its own with the clock it injects, so
/// that what the scheduler decides about time is checked without waiting for it.
package protocol WakeTimer: Sendable {
    /// Starts firing to `handler` (an arm made before takes effect now).
    func start(_ handler: @escaping @Sendable () -> Void)
    /// Fires the handler `milliseconds` from now, or earlier if an earlier firing is armed.
    func arm(afterMilliseconds milliseconds: Int64)
    /// Stops; a firing in progress completes first, an armed one is dropped.
    func stop()
}
