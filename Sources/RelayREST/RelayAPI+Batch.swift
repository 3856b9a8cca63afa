import RelayCore
import RelayCrypto
import RelayHTTP
import RelayLive
import RelaySettings
import RelayStore
import RelayTelemetry

extension RelayAPI {
    /// The most messages one batch may carry.
    static let maxBatchMessages = 1000

    /// `POST /v1/messages/batch {messages: [message, …]}`: up to 1,000 messages, each exactly
    /// what `POST /v1/messages` takes, stored in as few transactions as `StoreWriter.maxRows`
    /// allows (one fsync for each). Answers 200, once every valid item is stored, with one result
    /// per item, in order, with the status and body the single endpoint would have given it: 202
    /// accepted, 200 replay, 409 conflict, 400/413 for an invalid item (the others still go in).
    /// If storing fails midway it answers the store's error and some items may be stored:
    /// idempotency is per item, so a whole batch can be retried safely.
    func postBatch(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        guard case .array(let items)? = json["messages"], (1...Self.maxBatchMessages).contains(items.count),
            items.allSatisfy({ if case .object = $0 { true } else { false } })
        else {
            throw .invalid("'messages' must be an array of 1 to \(Self.maxBatchMessages) message objects")
        }
        // Each item validated on its own: a bad one gets its error, the others are stored.
        var results: [BatchItem] = []
        var validItems: [(index: Int, message: IncomingMessage, fingerprint: [UInt8])] = []
        for (index, item) in items.enumerated() {
            do throws(APIError) {
                let message = try APIError.validating { () throws(ValidationError) in
                    try IncomingMessage(
                        json: item, maxPayloadBytes: config.maxPayloadBytes, defaultTTLSeconds: config.retentionS)
                }
                validItems.append((index, message, Crypto.sha256(item.canonical.serialized)))
                // (Replaced by the item's outcome once the batch is committed.)
                results.append(.invalid(id: message.id, APIError(500, "internal_error", "no outcome")))
            } catch {
                results.append(.invalid(id: item["id"]?.stringValue, error))
            }
        }
        let valid = validItems
        let createdAt = clock.now()
        let messages = valid.map { entry in
            NewMessage(
                message: entry.message, fingerprint: entry.fingerprint, now: createdAt, delivery: delivery,
                online: onlineSnapshot(entry.message.recipients))
        }
        let metrics = self.metrics
        let live = self.live
        let answer = { @Sendable (results: [BatchItem]) in
            var writer = JSONWriter(capacity: 64 + results.count * 96)
            writer.beginObject()
            writer.key("results")
            writer.beginArray()
            for result in results { result.write(into: &writer) }
            writer.endArray()
            writer.endObject()
            reply.json(200, writer.bytes)
        }
        guard !messages.isEmpty else { return answer(results) }
        store.acceptBatch(
            messages,
            committed: { index, outcome in
                // Live as soon as committed, in commit order, like a single post's message.
                guard case .accepted(let recipients) = outcome else { return }
                metrics.recordAccepted(recipients: recipients.count)
                live.publish(valid[index].message, recipients: recipients, createdAt: createdAt)
            },
            completion: onStore(reply) { [results] (outcomes: [AcceptOutcome]) in
                var results = results
                for (entry, outcome) in zip(valid, outcomes) {
                    results[entry.index] = .stored(id: entry.message.id, outcome)
                }
                answer(results)
            })
    }

    /// The recipients' devices with an open foreground socket now (a message's delivery snapshot).
    func onlineSnapshot(_ recipients: [String]) -> [String: Set<String>] {
        var online: [String: Set<String>] = [:]
        for userId in recipients {
            let devices = live.onlineDevices(userId)
            if !devices.isEmpty { online[userId] = devices }
        }
        return online
    }
}

/// One item's result in a batch answer.
private enum BatchItem: Sendable {
    case stored(id: String, AcceptOutcome)
    case invalid(id: String?, APIError)

    func write(into writer: inout JSONWriter) {
        writer.beginObject()
        switch self {
        case .stored(let id, .accepted(let recipients)):
            writer.member("id", id)
            writer.member("status", Int64(202))
            writer.recipients(recipients)
        case .stored(let id, .replay(let recipients)):
            writer.member("id", id)
            writer.member("status", Int64(200))
            writer.recipients(recipients)
        case .stored(let id, .conflict):
            writer.member("id", id)
            writer.member("status", Int64(409))
            writer.apiError(
                code: "idempotency_conflict", "a message with this id was already accepted with a different body")
        case .invalid(let id, let error):
            writer.member("id", orNull: id)
            writer.member("status", Int64(error.status))
            writer.apiError(code: error.code, error.message)
        }
        writer.endObject()
    }
}

extension JSONWriter {
    /// `"error": {code, message}`, as every error answer has it.
    mutating func apiError(code: String, _ message: String) {
        key("error")
        beginObject()
        member("code", code)
        member("message", message)
        endObject()
    }
}
