import RelayCore
import RelayHTTP
import RelayLive
import RelayStore

extension RelayAPI {
    /// The most messages one catch-up page holds, and its payload byte budget.
    static let maxPageLimit: Int64 = 10_000
    static let defaultPageLimit: Int64 = 500
    static let pageByteBudget = 4 << 20

    /// `GET /v1/users/{userId}/messages?after=&epoch=&limit=`: the messages after the cursor,
    /// in seq order, or `complete: false` when the cursor cannot be served exactly.
    func catchUp(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        let principal = try auth.requireUser(request, userId: userId)
        let after = try request.integerQuery("after", default: 0, in: 0...Int64.max)
        let limit = try request.integerQuery("limit", default: Self.defaultPageLimit, in: 1...Self.maxPageLimit)
        let epoch = request.queryValue("epoch")
        if let epoch, epoch.isEmpty || epoch.utf8.count > 64 {
            throw .invalid("query parameter 'epoch' must be 1 to 64 characters")
        }
        // Sized for a page of typical messages: growing a page of megabytes copies it again.
        var page = CatchUpJSON(userId: userId, capacity: min(Int(limit) * 400, Self.pageByteBudget) + 1024)
        try read(reply) { () throws(StoreError) in
            try store.catchUp(
                userId: userId, after: after, epoch: epoch, limit: Int(limit), maxBytes: Self.pageByteBudget,
                into: &page)
        }
        if case .client = principal, let last = page.lastSeq {
            store.markFetched(userId: userId, seq: last)
        }
        reply.json(200, page.writer.bytes)
    }

    /// `POST /v1/users/{userId}/ack {seq, epoch?}`: moves the ack cursor forward (never back).
    func ack(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        _ = try auth.requireUser(request, userId: userId)
        let json = try request.jsonBody()
        let (seq, epoch) = try APIError.validating { () throws(ValidationError) in
            let fields = try FieldReader(json)
            return (try fields.integer("seq", in: 0...Int64.max), try fields.optionalString("epoch", maxLength: 64))
        }
        let live = self.live
        store.ack(
            userId: userId, seq: seq, epoch: epoch, now: clock.now(),
            completion: onStore(reply) { (outcome: AckOutcome) in
                switch outcome {
                case .acknowledged(let ackSeq):
                    live.acknowledged(userId: userId, seq: ackSeq)
                    reply.noContent()
                case .unchanged:
                    reply.noContent()
                case .beyondHead(let head):
                    throw APIError(409, "seq_beyond_head", "'seq' \(seq) is beyond the newest message (\(head))")
                case .epochMismatch(let current):
                    throw APIError(409, "epoch_mismatch", "the inbox epoch is now \(current); resync and ack again")
                }
            })
    }
}
