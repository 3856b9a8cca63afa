/// Which due devices a scheduler pass reads, by receiver host: no more per host than that host
/// has delivery slots free, so a pass never reads batches it would only put back (one busy host
/// with a deep queue would otherwise be re-read in full on every pass).
///
/// Pure: the store asks it of each due device as it reads them (`RelayStore.pushBatches`), so
/// that the scan stops as soon as the pass has what it can send; the pass then sends each batch
/// to the transport parsed here (`placed`), not parsed again. Kept across passes for its cache
/// of webhook URLs (parsing one costs more than the row it came with, and the same receiver
/// comes back push after push).
package struct HostAdmission: Sendable {
    /// A device's push transport, parsed, with the route its slots and breaker are kept per, and
    /// how many deliveries that route may have in flight.
    package struct Target {
        package let transport: PushTransport
        package let route: PushRoute
        package let slots: Int

        package init(transport: PushTransport, route: PushRoute, slots: Int) {
            self.transport = transport
            self.route = route
            self.slots = slots
        }
    }

    /// How many due devices a pass looks past once their hosts are full, looking for other
    /// hosts' jobs, before it stops.
    package static let lookPastFull = 64

    private var free: [PushRoute: Int] = [:]
    /// Parsed webhook URLs, by their stored form. A push service's transport is one device's
    /// token: caching it would only grow the table.
    private var targets: [String: Target?] = [:]
    /// Transports parsed in this pass and in the one before, by device key: a batch taken is
    /// sent with what `consider` parsed, and a device looked past comes back in the next pass.
    private var parsed: [String: (stored: String, target: Target?)] = [:]
    private var parsedBefore: [String: (stored: String, target: Target?)] = [:]
    private var inFlight: [PushRoute: Int] = [:]
    private var turnedDown = 0
    private let place: @Sendable (PushTransport) -> (route: PushRoute, slots: Int)

    /// - Parameter place: a transport's route, and the deliveries that route may have in flight.
    package init(place: @escaping @Sendable (PushTransport) -> (route: PushRoute, slots: Int)) {
        self.place = place
    }

    /// The same number of slots for every host (a route per host and transport).
    package init(slotsPerHost: Int, hostOf: @escaping @Sendable (PushTransport) -> String) {
        self.init { transport in (PushRoute(transport.kind, host: hostOf(transport)), slotsPerHost) }
    }

    /// Starts a pass with the slots taken now.
    package mutating func begin(inFlight: [PushRoute: Int]) {
        self.inFlight = inFlight
        free.removeAll(keepingCapacity: true)
        swap(&parsed, &parsedBefore)
        parsed.removeAll(keepingCapacity: true)
        turnedDown = 0
        // Transports come and go with devices; the cache only saves work, so forget it all at once.
        if targets.count > 100_000 { targets.removeAll() }
    }

    /// What a pass does with a due device.
    package enum Choice: Sendable, Equatable {
        /// Read its batch (counted against its host).
        case take
        /// Leave it for a later pass: its host has no slot free.
        case skip
        /// Read no further: `lookPastFull` devices of full hosts were looked past already.
        case stop
    }

    /// Whether the device's batch is worth reading now; counts it against its host if so. (A
    /// malformed transport is taken, so that its jobs are dead-lettered.)
    package mutating func consider(_ device: DueDevice) -> Choice {
        guard let target = target(of: device) else { return .take }
        let route = target.route
        let left = free[route] ?? (target.slots - inFlight[route, default: 0])
        guard left > 0 else {
            turnedDown += 1
            return turnedDown < Self.lookPastFull ? .skip : .stop
        }
        free[route] = left - 1
        return .take
    }

    /// The transport of a batch this pass read: the one `consider` parsed, unless the device
    /// changed it in between.
    package mutating func placed(_ batch: PushBatch) -> Target? {
        if let known = parsed[batch.deviceKey], known.stored == batch.target { return known.target }
        return target(batch.target)
    }

    private mutating func target(of device: DueDevice) -> Target? {
        let key = device.key
        if let known = parsed[key] ?? parsedBefore[key], known.stored == device.target {
            parsed[key] = known
            return known.target
        }
        let target = target(device.target)
        parsed[key] = (device.target, target)
        return target
    }

    /// Takes every device (no host is ever full): for reading everything that is due.
    package static var takingAll: HostAdmission { HostAdmission(slotsPerHost: .max) { _ in "" } }

    /// The stored transport parsed, or nil when it is malformed.
    private mutating func target(_ stored: String) -> Target? {
        let shared = stored.utf8.first != UInt8(ascii: "{")  // (a push service's is a JSON object)
        if shared, let known = targets[stored] { return known }
        let parsed = PushTransport(target: stored).map { transport in
            let (route, slots) = place(transport)
            return Target(transport: transport, route: route, slots: slots)
        }
        if shared { targets[stored] = .some(parsed) }
        return parsed
    }
}
