/// Finds a silently dead connection: no FIN, no RST, nothing ever arrives again (a NAT that forgot
/// the mapping, a hand-over from Wi-Fi to cellular). Pure: the caller says what it saw and when.
///
/// The relay pings after `pingInterval` without a byte from the client, so a healthy socket never
/// stays silent much longer than that. The link counts as dead after `pingInterval × 1.5 + 5 s`
/// without a byte; halfway between the relay's expected ping and that limit the client pings
/// once itself, so that a relay slow to ping (or a client busy sending) is not taken for dead.
public struct LinkWatchdog: Sendable, Equatable {
    /// What the caller should do after an observation.
    public enum Action: Sendable, Equatable {
        case none
        /// Send one ping: the link has been silent for a while.
        case ping
        /// Close the connection and reconnect: nothing arrived for `silenceLimit`.
        case dead
    }

    /// The relay's ping interval assumed when its `welcome` does not say (its default).
    public static let defaultPingInterval: Double = 25

    /// Seconds without a byte after which the link is dead.
    public private(set) var silenceLimit: Double
    /// Seconds without a byte after which the client pings.
    public private(set) var pingAfter: Double
    private var lastTraffic: Double
    private var lastCount: UInt64
    private var pinged = false

    /// A watchdog for a connection opened at `now`, before the relay said its interval.
    public init(now: Double, pingInterval: Double = Self.defaultPingInterval) {
        lastTraffic = now
        lastCount = 0
        silenceLimit = 0
        pingAfter = 0
        setPingInterval(pingInterval)
    }

    /// The relay's ping interval, from its `welcome` frame (seconds).
    public mutating func setPingInterval(_ seconds: Double) {
        let interval = seconds.isFinite && seconds > 0 ? seconds : Self.defaultPingInterval
        silenceLimit = interval * 1.5 + 5
        pingAfter = (interval + silenceLimit) / 2
    }

    /// How often the caller should observe: often enough that a death is seen within an eighth
    /// of the limit, at most every 5 s (a phone's radio is woken by timers, not by this check).
    public var checkInterval: Double { min(5, max(0.25, silenceLimit / 8)) }

    /// `count` grows whenever anything arrived (frames, pings, pongs); `now` in seconds.
    public mutating func observe(count: UInt64, now: Double) -> Action {
        if count != lastCount {
            lastCount = count
            lastTraffic = now
            pinged = false
            return .none
        }
        let silent = now - lastTraffic
        if silent >= silenceLimit { return .dead }
        if silent >= pingAfter, !pinged {
            pinged = true
            return .ping
        }
        return .none
    }
}
