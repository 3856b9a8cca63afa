import RelayCore
import RelayCrypto
import RelayHTTP
import RelayStore
import RelayTelemetry

extension RelayAPI {
    /// `POST /_matrix/push/v1/notify?secret=…`: the Matrix Push Gateway API. A homeserver
    /// (Synapse's HTTP pusher) points a pusher's `url` here; the path must be exactly this (Synapse
    /// refuses any other), so the credential travels as the `secret` query parameter. Each addressed pusher must be a
    /// device registered with its `matrix` identity; the others come back in `rejected` (and
    /// so do disabled ones), so that the homeserver deletes those pushers.
    ///
    /// With an `event_id`, the event becomes a message in each addressed user's inbox — id
    /// derived from `event_id` and the user, so a homeserver's retry replays it — delivered live
    /// to an online device and otherwise pushed through the notifier, durably, with the
    /// homeserver's `counts.unread` as the badge. Without one (a read receipt lowered the count),
    /// each device gets a badge-only `clear` push and nothing is stored.
    func matrixNotify(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireMatrixGateway(
            presented: request.queryValue("secret") ?? "", configured: config.matrixNotifySecret)
        let json = try request.jsonBody()
        let notification = try APIError.validating { () throws(ValidationError) in try MatrixNotification(json: json) }
        var rejected: [String] = []
        var users: [(userId: String, devices: [Device], eventIdOnly: Bool)] = []
        for pusher in notification.devices {
            let found = try read(reply) { () throws(StoreError) in
                try store.device(matrixAppId: pusher.appId, pushkey: pusher.pushkey)
            }
            guard let device = found, device.active else {
                rejected.append(pusher.pushkey)
                continue
            }
            if let index = users.firstIndex(where: { $0.userId == device.userId }) {
                users[index].devices.append(device)
                users[index].eventIdOnly = users[index].eventIdOnly || pusher.eventIdOnly
            } else {
                users.append((device.userId, [device], pusher.eventIdOnly))
            }
        }
        metrics.recordMatrixNotify(rejected: rejected.count)
        let answer = Self.rejectedBody(rejected)
        if notification.eventId == nil {
            guard let badge = notification.unread else { return reply.json(200, answer) }
            updateBadges(users.flatMap(\.devices), badge: badge, reply) { reply.json(200, answer) }
            return
        }
        let messages = try users.map { user throws(APIError) in
            try matrixMessage(notification, userId: user.userId, eventIdOnly: user.eventIdOnly)
        }
        acceptAll(messages[...], reply) { reply.json(200, answer) }
    }

    /// The message an event makes for one user, and its fingerprint.
    private func matrixMessage(
        _ notification: MatrixNotification, userId: String, eventIdOnly: Bool
    ) throws(APIError) -> (IncomingMessage, [UInt8]) {
        guard let id = notification.messageId(userId: userId, digest: { Crypto.sha256($0) }) else {
            throw .invalid("the notification has no event_id")
        }
        let body = notification.messageRequest(id: id, userId: userId, eventIdOnly: eventIdOnly)
        guard let json = try? JSONParser.parse(body) else {
            throw APIError(500, "internal_error", "cannot map the event")
        }
        var message = try APIError.validating { () throws(ValidationError) in
            try IncomingMessage(
                json: json, maxPayloadBytes: config.maxPayloadBytes, defaultTTLSeconds: config.retentionS)
        }
        message.badge = notification.unread
        return (message, Crypto.sha256(json.canonical.serialized))
    }

    /// Stores the messages one after the other; a replay or a conflict (the same event mapped
    /// for another pusher of the same user) means the inbox has it already.
    private func acceptAll(
        _ messages: ArraySlice<(IncomingMessage, [UInt8])>, _ reply: Reply, then done: @escaping @Sendable () -> Void
    ) {
        guard let (message, fingerprint) = messages.first else { return done() }
        submit(message, fingerprint: fingerprint, reply) { [self] _ in
            acceptAll(messages.dropFirst(), reply, then: done)
        }
    }

    private func updateBadges(
        _ devices: [Device], badge: Int64, _ reply: Reply, then done: @escaping @Sendable () -> Void
    ) {
        guard let device = devices.first else { return done() }
        store.queueBadge(
            userId: device.userId, deviceId: device.deviceId, badge: badge, now: now(),
            completion: onStore(reply) { [self] (_: Void) in
                updateBadges(Array(devices.dropFirst()), badge: badge, reply, then: done)
            })
    }

    static func rejectedBody(_ pushkeys: [String]) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("rejected")
        writer.beginArray()
        for pushkey in pushkeys { writer.string(pushkey) }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }
}
