package import RelayCore

/// What a node tells the others when a transaction of its commits (`PostgresCluster`), one line
/// per note in the notification's payload, after the node's id.
package enum ClusterNote: Sendable, Equatable {
    /// `seq` was committed to `userId`'s inbox: `m <user> <seq>`.
    case committed(userId: String, seq: Int64)
    /// A device went online or offline on the node: `p <user> <device> 1|0`.
    case presence(userId: String, deviceId: String, online: Bool)
    /// The node's devices count as online until then: `l <milliseconds>`.
    case lease(until: Timestamp)
    /// A device was deleted: its tokens issued up to then are refused, its sockets closed:
    /// `r <user> <device> <seconds>`.
    case revoked(userId: String, deviceId: String, atSeconds: Int64)
    /// Push or event jobs may have been queued or changed (`WriteEffect.jobs`): the delivering
    /// node looks at its outbox again: `j`.
    case jobs

    /// The line on the wire (user and device ids have no spaces: `Identifier`).
    var line: String {
        switch self {
        case .committed(let userId, let seq): return "m \(userId) \(seq)"
        case .presence(let userId, let deviceId, let online): return "p \(userId) \(deviceId) \(online ? 1 : 0)"
        case .lease(let until): return "l \(until.milliseconds)"
        case .revoked(let userId, let deviceId, let seconds): return "r \(userId) \(deviceId) \(seconds)"
        case .jobs: return "j"
        }
    }

    init?(line: Substring) {
        let fields = line.split(separator: " ")
        switch (fields.first, fields.count) {
        case ("m", 3):
            guard let seq = Int64(fields[2]) else { return nil }
            self = .committed(userId: String(fields[1]), seq: seq)
        case ("p", 4):
            self = .presence(userId: String(fields[1]), deviceId: String(fields[2]), online: fields[3] == "1")
        case ("r", 4):
            guard let seconds = Int64(fields[3]) else { return nil }
            self = .revoked(userId: String(fields[1]), deviceId: String(fields[2]), atSeconds: seconds)
        case ("j", 1):
            self = .jobs
        case ("l", 2):
            guard let until = Int64(fields[1]) else { return nil }
            self = .lease(until: Timestamp(milliseconds: until))
        default:
            return nil
        }
    }
}

/// A device another node holds online, and until when that node's lease runs.
package struct RemotePresence: Sendable, Equatable {
    package var nodeId: String
    package var userId: String
    package var deviceId: String
    package var leaseUntil: Timestamp
}
