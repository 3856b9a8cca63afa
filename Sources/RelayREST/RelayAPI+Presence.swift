import RelayCore
import RelayHTTP
import RelayLive
import RelayStore

extension RelayAPI {
    /// `GET /v1/users/{userId}/presence`: online from the gateway, `lastOnline` from the store or,
    /// while it writes a newer one, the hub (null for a user never seen); devices are the
    /// registered push devices and every device ever seen on a WebSocket.
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
        let userIds = try APIError.validating { () throws(ValidationError) in
            try FieldReader(json).identifierList("userIds", maxCount: 1000)
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
            (try store.devices(userId: userId), try live.lastOnline(userId))
        }
        let online = live.onlineDevices(userId)
        let ids = Set(registered.map(\.deviceId)).union(seen.keys).union(online).sorted()
        writer.presence(
            userId: userId, devices: ids.map { ($0, online.contains($0), seen[$0]) }, now: clock.now())
    }

    /// `POST /v1/users/{userId}/presence {state, deviceId?}`: a client reports going to the
    /// background or foreground; applies to that device's open WebSockets (the device comes from
    /// the body, else the token's `did`).
    func postPresence(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        let principal = try auth.requireUser(request, userId: userId)
        let json = try request.jsonBody()
        let (background, requested) = try APIError.validating { () throws(ValidationError) -> (Bool, String?) in
            let fields = try FieldReader(json)
            let state = try fields.string("state")
            guard state == "background" || state == "foreground" else {
                throw ValidationError(.invalidField, field: "state", "'state' must be \"background\" or \"foreground\"")
            }
            return (state == "background", fields.value("deviceId") != nil ? try fields.identifier("deviceId") : nil)
        }
        var deviceId = requested
        if case .client(let claims) = principal {
            if let requested, let own = claims.deviceId, own != requested {
                throw .forbidden("a client token may only report presence for its own device")
            }
            deviceId = requested ?? claims.deviceId
        }
        if let deviceId { live.setBackground(userId: userId, deviceId: deviceId, background) }
        reply.noContent()
    }
}
