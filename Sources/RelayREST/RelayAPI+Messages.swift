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
    /// fans it out live by the thread that saw its commit become durable, then hands the outcome
    /// to `done`.
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
            durable: { outcome in
                guard case .accepted(let recipients) = outcome else { return }
                metrics.recordAccepted(recipients: recipients.count)
                live.publish(message, recipients: recipients, createdAt: createdAt)
            },
            completion: onStore(reply, done))
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

extension RelayAPI {
    /// `GET /v1/messages/{id}/deliveries`: the delivery trace — for each recipient, each of its
    /// devices (transport, app, token shortened) with what became of the message there (a
    /// `TraceDecision` and its reason, the window it waits in) and every attempt that carried it
    /// (time, push id and seqs, status, provider id, latency, result).
    func getMessageDeliveries(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let id = request.parameter("id")
        guard Identifier.isValidMessageId(id) else {
            throw .invalid("'id' must be 1 to 200 bytes without control characters or '/', and not 'batch'")
        }
        let now = clock.now()
        guard let message = try read(reply, { () throws(StoreError) in try store.message(id: id, now: now) }) else {
            throw .notFound("no message with this id (never accepted, or already pruned)")
        }
        var writer = JSONWriter(capacity: 1024)
        writer.beginObject()
        writer.member("messageId", message.id)
        writer.key("recipients")
        writer.beginArray()
        for recipient in message.recipients {
            let trace = try read(reply) { () throws(StoreError) in
                try store.trace(messageId: id, userId: recipient.userId, seq: recipient.seq)
            }
            let devices = try read(reply) { () throws(StoreError) in try store.devices(userId: recipient.userId) }
            writer.beginObject()
            writer.member("userId", recipient.userId)
            writer.member("seq", recipient.seq)
            writer.member("state", recipient.state.rawValue)
            writer.key("devices")
            writer.beginArray()
            // The devices it has now, and any one its jobs name that is gone since.
            let named = devices.map(\.deviceId)
            let gone = Set(trace.jobs.map(\.deviceId)).subtracting(named).sorted()
            for deviceId in named + gone {
                writer.traceDevice(
                    deviceId, device: devices.first { $0.deviceId == deviceId },
                    job: trace.jobs.last { $0.deviceId == deviceId && $0.kind != .clear },
                    attempts: trace.attempts.filter { $0.deviceId == deviceId }, window: trace.windows[deviceId])
            }
            writer.endArray()
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        reply.json(200, writer.bytes)
    }
}

extension JSONWriter {
    fileprivate mutating func traceDevice(
        _ deviceId: String, device: Device?, job: DeliveryTrace.Job?, attempts: [PushAttempt], window: [String]?
    ) {
        beginObject()
        member("deviceId", deviceId)
        let transport = device?.transport
        member("transport", orNull: transport?.kind.rawValue)
        member("app", orNull: transport?.app.name)
        member("to", orNull: transport?.shortened)
        member("deviceState", device.map { $0.active ? "active" : "disabled" } ?? "deleted")
        let decision = TraceDecision(state: job?.state, attempts: job?.attempts ?? 0, lastError: job?.lastError)
        member("decision", decision.rawValue)
        member("reason", orNull: decision == .pushed ? nil : job?.lastError ?? device?.disabledReason)
        if let job {
            member("kind", job.kind.rawValue)
            if job.state == .pending { member("dueAt", job.dueAt) }
            member("updatedAt", job.updatedAt)
        }
        if let window, !window.isEmpty {
            key("window")
            beginArray()
            for message in window { string(message) }
            endArray()
        }
        key("attempts")
        beginArray()
        for attempt in attempts {
            beginObject()
            member("at", attempt.at)
            member("pushId", attempt.pushId)
            member("kind", attempt.kind.rawValue)
            key("seq")
            beginObject()
            member("from", attempt.seqFrom)
            member("to", attempt.seqTo)
            endObject()
            member("transport", attempt.transport.rawValue)
            member("app", attempt.app.name)
            key("status")
            if let status = attempt.status { int(Int64(status)) } else { null() }
            member("providerId", orNull: attempt.providerId)
            member("latencyMs", attempt.latencyMs)
            member("result", attempt.result.rawValue)
            member("reason", orNull: attempt.reason)
            endObject()
        }
        endArray()
        endObject()
    }
}
