import RelayCore
import RelayCrypto
import RelayHTTP
import RelayLive
import RelaySettings
import RelayStore
import RelayTelemetry

extension RelayAPI {
    /// `POST /v1/messages`: validate, store durably (group commit), then answer 202 — or the
    /// first answer again (200) for a replay, 409 for the same id with another body.
    func postMessage(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        let message = try APIError.validating { () throws(ValidationError) in
            try IncomingMessage(
                json: json, maxPayloadBytes: config.maxPayloadBytes, defaultTTLSeconds: config.retentionS)
        }
        // The fingerprint covers the parsed, canonicalized request, so member order, spacing or
        // escaping differences in a retry do not count as "another body".
        let fingerprint = Crypto.sha256(json.canonical.serialized)
        submit(message, fingerprint: fingerprint, reply) { outcome in
            switch outcome {
            case .accepted(let recipients):
                reply.json(202, Self.acceptedBody(id: message.id, recipients))
            case .replay(let recipients):
                reply.json(200, Self.acceptedBody(id: message.id, recipients))
            case .conflict:
                throw APIError(
                    409, "idempotency_conflict", "a message with this id was already accepted with a different body")
            }
        }
    }

    /// Stores a message (next group commit) with a snapshot of its recipients' online devices,
    /// fans it out live once committed, then hands the outcome to `done`.
    func submit(
        _ message: IncomingMessage, fingerprint: [UInt8], targets: PushTargets? = nil, _ reply: Reply,
        done: @escaping @Sendable (AcceptOutcome) throws -> Void
    ) {
        let metrics = self.metrics
        let live = self.live
        let createdAt = clock.now()
        store.accept(
            NewMessage(
                message: message, fingerprint: fingerprint, now: createdAt, delivery: delivery,
                online: onlineSnapshot(message.recipients), targets: targets),
            completion: onStore(reply) { (outcome: AcceptOutcome) in
                if case .accepted(let recipients) = outcome {
                    metrics.recordAccepted(recipients: recipients.count)
                    live.publish(message, recipients: recipients, createdAt: createdAt)
                }
                try done(outcome)
            })
    }

    static func acceptedBody(id: String, _ recipients: [RecipientSeq]) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + recipients.count * 48)
        writer.beginObject()
        writer.member("id", id)
        writer.recipients(recipients)
        writer.endObject()
        return writer.bytes
    }

    /// `GET /v1/messages/{id}`: the message and each recipient's delivery state.
    func getMessage(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let id = request.parameter("id")
        guard Identifier.isValidMessageId(id) else {
            throw .invalid("'id' must be 1 to 200 bytes without control characters or '/', and not 'batch'")
        }
        let now = clock.now()
        guard let message = try read(reply, { () throws(StoreError) in try store.message(id: id, now: now) }) else {
            throw .notFound("no message with this id (never accepted, or already pruned)")
        }
        let pushes = try read(reply) { () throws(StoreError) in try store.deliveries(messageId: id) }
        var writer = JSONWriter(capacity: 256 + message.payload.count)
        writer.beginObject()
        writer.member("id", message.id)
        writer.member("conversationId", orNull: message.conversationId)
        writer.member("senderId", orNull: message.senderId)
        writer.key("payload")
        writer.raw(message.payload)
        writer.key("push")
        if let push = message.push { writer.raw(push) } else { writer.null() }
        writer.member("priority", message.priority)
        writer.member("collapseKey", orNull: message.collapseKey)
        writer.member("createdAt", message.createdAt)
        writer.member("expiresAt", message.expiresAt)
        writer.key("recipients")
        writer.beginArray()
        for recipient in message.recipients {
            writer.beginObject()
            writer.member("userId", recipient.userId)
            writer.member("seq", recipient.seq)
            writer.member("state", recipient.state.rawValue)
            writer.endObject()
        }
        writer.endArray()
        // Its push jobs, one per device (and attempt history in `attempts`/`lastError`): the
        // delivery timeline an operator looks a message up for.
        writer.key("pushes")
        writer.beginArray()
        for push in pushes { writer.delivery(push) }
        writer.endArray()
        writer.endObject()
        reply.json(200, writer.bytes)
    }
}
