import RelayCore
import RelayStore

/// Which due devices a scheduler pass reads, by receiver host: no more per host than that host
/// has delivery slots free, so a pass never reads batches it would only put back (one busy host
/// with a deep queue would otherwise be re-read in full on every pass).
///
/// Kept across passes for its cache of each push URL's host (parsing a URL costs more than the
/// row it came with).
struct HostAdmission {
    /// How many due devices a pass looks past once their hosts are full, looking for other
    /// hosts' jobs, before it stops.
    static let lookPastFull = 64

    private var free: [String: Int] = [:]
    private var hostOfURL: [String: String] = [:]
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
        if hostOfURL.count > 100_000 { hostOfURL.removeAll() }
    }

    /// Whether a batch for `pushURL` is worth reading now; counts it against its host if so.
    mutating func admit(_ pushURL: String) -> PushAdmission {
        let host: String
        if let known = hostOfURL[pushURL] {
            host = known
        } else {
            host = Self.hostKey(pushURL)
            hostOfURL[pushURL] = host
        }
        let left = free[host] ?? (slotsPerHost - inFlight[host, default: 0])
        guard left > 0 else {
            turnedDown += 1
            return turnedDown < Self.lookPastFull ? .skip : .stop
        }
        free[host] = left - 1
        return .take
    }

    /// `host:port` of a receiver URL: what slots and breakers are kept per.
    static func hostKey(_ url: String) -> String {
        guard let parsed = try? PushURL(url) else { return url }
        return "\(parsed.host):\(parsed.port)"
    }
}
