/// A value read at one moment and reused until it is `windowMs` old: any number of reads within
/// the window cost one. Pure; the caller supplies the time (monotonic milliseconds).
package struct CachedValue<Value: Sendable>: Sendable {
    package let windowMs: Int64
    private var stored: (value: Value, at: Int64)?

    package init(windowMs: Int64) { self.windowMs = windowMs }

    /// The value stored less than `windowMs` before `now`, if any.
    package func value(now: Int64) -> Value? {
        guard let stored, now >= stored.at, now - stored.at < windowMs else { return nil }
        return stored.value
    }

    package mutating func store(_ value: Value, now: Int64) { stored = (value, now) }
}
