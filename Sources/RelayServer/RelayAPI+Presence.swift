import RelayCore
import RelayHTTP
import RelayStore

extension RelayAPI {
    /// `GET /v1/users/{userId}/presence`. Until the WebSocket gateway lands nobody is online;
    /// `lastOnline` is null for a user never seen.
    func getPresence(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let userId = try request.identifier("userId")
        var writer = JSONWriter()
        try writePresence(userId, into: &writer, reply)
        reply.json(200, writer.bytes)
    }

    /// `POST /v1/presence/query {userIds}`.
    func queryPresence(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        let userIds: [String]
        do {
            userIds = try FieldReader(json).identifierList("userIds", maxCount: 1000)
        } catch {
            throw .validation(error)
        }
        var writer = JSONWriter(capacity: userIds.count * 96)
        writer.beginObject()
        writer.key("presence")
        writer.beginArray()
        for userId in userIds { try writePresence(userId, into: &writer, reply) }
        writer.endArray()
        writer.endObject()
        reply.json(200, writer.bytes)
    }

    private func writePresence(_ userId: String, into writer: inout JSONWriter, _ reply: Reply) throws(APIError) {
        let (head, devices) = try read(reply) { () throws(StoreError) in
            (try store.inboxHead(userId: userId), try store.devices(userId: userId))
        }
        writer.presence(userId: userId, lastOnline: head.lastOnline, devices: devices)
    }

    /// `POST /v1/users/{userId}/presence {state, deviceId?}`: a client reports going to the
    /// background or foreground. Accepted and validated now; it drives presence once the
    /// WebSocket gateway tracks devices.
    func postPresence(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        let principal = try auth.requireUser(request, userId: userId)
        let json = try request.jsonBody()
        try APIError.validating {
            let fields = try FieldReader(json)
            let state = try fields.string("state")
            guard state == "background" || state == "foreground" else {
                throw ValidationError(.invalidField, field: "state", "'state' must be \"background\" or \"foreground\"")
            }
            if fields.value("deviceId") != nil {
                let deviceId = try fields.identifier("deviceId")
                if case .client(let claims) = principal, let own = claims.deviceId, own != deviceId {
                    throw APIError.forbidden("a client token may only report presence for its own device")
                }
            }
        }
        reply.noContent()
    }
}
