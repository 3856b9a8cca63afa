import RelayCore
import RelayStore

/// Which due devices a scheduler pass reads, by receiver host: no more per host than that host
/// has delivery slots free, so a pass never reads batches it would only put back (one busy host
/// with a deep queue would otherwise be re-read in full on every pass).
///
/// Kept across passes for its cache of parsed push URLs (parsing a URL costs more than the row
/// it came with, and the same URLs come back push after push).
struct HostAdmission {
    /// A push URL, parsed, with the `host:port` its slots and breaker are kept per.
    struct Target {
        let url: PushURL
        let host: String
    }

    /// How many due devices a pass looks past once their hosts are full, looking for other
    /// hosts' jobs, before it stops.
    static let lookPastFull = 64

    private var free: [String: Int] = [:]
    private var targets: [String: Target?] = [:]
    private var inFlight: [String: Int] = [:]
    private var slotsPerHost: Int
    private var turnedDown = 0

    init(slotsPerHost: Int) {
        self.slotsPerHost = slotsPerHost
    }

    /// Starts a pass with the slots taken now.
    mutating func begin(inFlight: [String: Int]) {
        self.inFlight = inFlight
        free.removeAll(keepingCapacity: true)
        turnedDown = 0
        // Push URLs come and go with devices; the cache only saves work, so forget it all at once.
        if targets.count > 100_000 { targets.removeAll() }
    }

    /// Whether a batch for `pushURL` is worth reading now; counts it against its host if so.
    /// (A malformed URL is read, to be dead-lettered.)
    mutating func admit(_ pushURL: String) -> PushAdmission {
        guard let host = target(pushURL)?.host else { return .take }
        let left = free[host] ?? (slotsPerHost - inFlight[host, default: 0])
        guard left > 0 else {
            turnedDown += 1
            return turnedDown < Self.lookPastFull ? .skip : .stop
        }
        free[host] = left - 1
        return .take
    }

    /// `pushURL` parsed, or nil when it is malformed.
    mutating func target(_ pushURL: String) -> Target? {
        if let known = targets[pushURL] { return known }
        let parsed = (try? PushURL(pushURL)).map { Target(url: $0, host: "\($0.host):\($0.port)") }
        targets[pushURL] = .some(parsed)
        return parsed
    }
}
