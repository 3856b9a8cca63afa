import RelayCore
import RelayHTTP
import RelayStore

extension RelayAPI {
    /// `GET /v1/users/{userId}/presence`: online from the gateway, `lastOnline` from the store
    /// (null for a user never seen); devices are the registered push devices and every device
    /// ever seen on a WebSocket.
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
        let (registered, seen) = try read(reply) { () throws(StoreError) in
            (try store.devices(userId: userId), try store.lastOnline(userId: userId))
        }
        let online = live?.hub.onlineDevices(userId) ?? []
        let ids = Set(registered.map(\.deviceId)).union(seen.keys).union(online).sorted()
        writer.presence(
            userId: userId, devices: ids.map { ($0, online.contains($0), seen[$0]) }, now: now())
    }

    /// `POST /v1/users/{userId}/presence {state, deviceId?}`: a client reports going to the
    /// background or foreground; applies to that device's open WebSockets (the device comes from
    /// the body, else the token's `did`).
    func postPresence(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        let principal = try auth.requireUser(request, userId: userId)
        let json = try request.jsonBody()
        let (background, deviceId): (Bool, String?) = try APIError.validating {
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
                return (state == "background", deviceId)
            }
            if case .client(let claims) = principal { return (state == "background", claims.deviceId) }
            return (state == "background", nil)
        }
        if let deviceId { live?.hub.setBackground(userId: userId, deviceId: deviceId, background) }
        reply.noContent()
    }
}
