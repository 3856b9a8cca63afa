import RelayCore
import RelayCrypto
import RelayHTTP
import RelaySettings
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
    /// to an online device and otherwise pushed, durably, to the addressed devices only (each
    /// pusher gets its own notify), with the homeserver's `counts.unread` as the badge. A device
    /// whose pusher asked for `event_id_only` is made content-free. Without an `event_id` (a read
    /// receipt lowered the count), each device gets a badge-only `clear` push and nothing is stored.
    ///
    /// A notify that parses is never refused: a homeserver retries a refused one for up to a day
    /// and holds every later notify of that pusher behind it.
    func matrixNotify(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireMatrixGateway(
            presented: request.queryValue("secret") ?? "", configured: config.matrixNotifySecret,
            caller: request.remoteAddress)
        let json = try request.jsonBody()
        let notification = try APIError.validating { () throws(ValidationError) in try MatrixNotification(json: json) }
        var rejected: [String] = []
        var users: [(userId: String, devices: [(device: Device, eventIdOnly: Bool)])] = []
        for pusher in notification.devices {
            // Longer than a registration may be: no device has it.
            guard pusher.appId.unicodeScalars.count <= MatrixNotification.maxAppIdCharacters,
                pusher.pushkey.unicodeScalars.count <= MatrixNotification.maxPushkeyCharacters
            else {
                rejected.append(pusher.pushkey)
                continue
            }
            let found = try read(reply) { () throws(StoreError) in
                try store.device(matrixAppId: pusher.appId, pushkey: pusher.pushkey)
            }
            guard let device = found, device.active else {
                rejected.append(pusher.pushkey)
                continue
            }
            if let index = users.firstIndex(where: { $0.userId == device.userId }) {
                users[index].devices.append((device, pusher.eventIdOnly))
            } else {
                users.append((device.userId, [(device, pusher.eventIdOnly)]))
            }
        }
        metrics.recordMatrixNotify(rejected: rejected.count)
        let answer = Self.rejectedBody(rejected)
        if notification.eventId == nil {
            guard let badge = notification.unread else { return reply.json(200, answer) }
            updateBadges(users.flatMap { $0.devices.map(\.device) }, badge: badge, reply) { reply.json(200, answer) }
            return
        }
        let messages = try users.map { user throws(APIError) in
            try matrixMessage(notification, userId: user.userId, devices: user.devices)
        }
        acceptAll(messages[...], reply) { reply.json(200, answer) }
    }

    /// The message an event makes for one user, its fingerprint, and the devices it is pushed to.
    /// The message is ids-only when every addressed pusher asked for that; an ids-only message
    /// has a fingerprint of its own that a fuller version of the same event supersedes (the
    /// pushers' notifies arrive in any order, the ids-only one often first).
    private func matrixMessage(
        _ notification: MatrixNotification, userId: String, devices: [(device: Device, eventIdOnly: Bool)]
    ) throws(APIError) -> (IncomingMessage, [UInt8], PushTargets) {
        guard let id = notification.messageId(userId: userId, digest: { Crypto.sha256($0) }) else {
            throw .invalid("the notification has no event_id")
        }
        let eventIdOnly = devices.allSatisfy(\.eventIdOnly)
        let body = notification.messageRequest(
            id: id, userId: userId, eventIdOnly: eventIdOnly, maxPayloadBytes: config.maxPayloadBytes,
            digest: { Crypto.sha256($0) })
        // (`messageRequest` always passes these checks; a failure here is the relay's own bug.)
        guard let json = try? JSONParser.parse(body),
            var message = try? IncomingMessage(
                json: json, maxPayloadBytes: config.maxPayloadBytes, defaultTTLSeconds: config.retentionS)
        else {
            throw APIError(500, "internal_error", "cannot map the event")
        }
        message.badge = notification.unread
        let idsOnly = Crypto.sha256(Array("matrix ids-only\u{0}\(id)".utf8))
        let targets = PushTargets(
            devices: [userId: Set(devices.map(\.device.deviceId))],
            contentFree: [
                userId: Set(devices.filter { $0.eventIdOnly && !$0.device.contentFree }.map(\.device.deviceId))
            ],
            supersedes: eventIdOnly ? nil : idsOnly)
        return (message, eventIdOnly ? idsOnly : Crypto.sha256(json.canonical.serialized), targets)
    }

    /// Stores the messages one after the other; a replay or a conflict (the same event mapped
    /// for another pusher of the same user) means the inbox has it already (the addressed
    /// devices still get their push).
    private func acceptAll(
        _ messages: ArraySlice<(IncomingMessage, [UInt8], PushTargets)>, _ reply: Reply,
        then done: @escaping @Sendable () -> Void
    ) {
        guard let (message, fingerprint, targets) = messages.first else { return done() }
        submit(message, fingerprint: fingerprint, targets: targets, reply) { [self] _ in
            acceptAll(messages.dropFirst(), reply, then: done)
        }
    }

    private func updateBadges(
        _ devices: [Device], badge: Int64, _ reply: Reply, then done: @escaping @Sendable () -> Void
    ) {
        guard let device = devices.first else { return done() }
        store.queueBadge(
            userId: device.userId, deviceId: device.deviceId, badge: badge, now: clock.now(),
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
