import RelayCore
import RelayHTTP
import RelaySettings
import RelayStore

extension RelayAPI {

    /// `GET /v1/deliveries?state=dead&userId=&limit=`: the dead-letter view (and the other states).
    func listDeliveries(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        // Without `state`, the dead letters.
        guard let state = request.queryValue("state").map(JobState.init(rawValue:)) ?? .dead else {
            throw .invalid("query parameter 'state' must be one of dead, pending, delivered, cancelled")
        }
        let userId = request.queryValue("userId")
        if let userId, !Identifier.isValidUserOrDeviceId(userId) { throw .invalid("'userId' is not a valid id") }
        let limit = try request.integerQuery("limit", default: 100, in: 1...1000)
        let records = try read(reply) { () throws(StoreError) in
            try store.deliveries(state: state, userId: userId, limit: Int(limit))
        }
        var writer = JSONWriter(capacity: 64 + records.count * 200)
        writer.beginObject()
        writer.key("deliveries")
        writer.beginArray()
        for record in records { writer.delivery(record) }
        writer.endArray()
        writer.endObject()
        reply.json(200, writer.bytes)
    }

    /// `POST /v1/deliveries/{id}/retry`: re-queues a dead delivery with a fresh attempt budget,
    /// even past its TTL (the operator's explicit decision).
    func retryDelivery(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        guard let id = Int64(request.parameter("id")), id > 0 else { throw .notFound("no delivery with this id") }
        let time = clock.now()
        store.retryDelivery(
            id: id, now: time, expiresAt: Timestamp(milliseconds: time.milliseconds + config.retentionS * 1000),
            completion: onStore(reply) { (outcome: RetryOutcome) in
                switch outcome {
                case .requeued(let record):
                    var writer = JSONWriter()
                    writer.delivery(record)
                    reply.json(202, writer.bytes)
                case .notFound:
                    throw APIError.notFound("no delivery with this id")
                case .notDead(let record):
                    throw APIError(
                        409, "not_dead", "only dead deliveries can be retried; this one is \(record.state.rawValue)")
                }
            })
    }
}

extension JSONWriter {
    mutating func delivery(_ record: DeliveryRecord) {
        beginObject()
        member("id", String(record.id))
        member("messageId", orNull: record.messageId)
        member("userId", record.userId)
        member("deviceId", record.deviceId)
        member("kind", record.kind.rawValue)
        member("state", record.state.rawValue)
        member("attempts", record.attempts)
        member("lastError", orNull: record.lastError)
        member("updatedAt", record.updatedAt)
        endObject()
    }
}
