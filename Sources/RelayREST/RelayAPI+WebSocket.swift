import RelayCore
import RelayHTTP
import RelayLive
import RelaySettings
import RelayStore
import WebSocketCodec

extension RelayAPI {
    /// `GET /v1/ws?after=&epoch=&deviceId=&state=`: authenticates the client (token in
    /// `Authorization` or `access_token`), validates the RFC 6455 handshake, and hands the socket
    /// to the gateway. `state=background` opens the socket in the background: its device is not
    /// online until a `foreground` frame, so a socket that never comes to the foreground (the
    /// console's watch) leaves no trace in the user's presence.
    func openWebSocket(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let credential = Authenticator.bearer(request) ?? request.queryValue("access_token")
        guard case .client(let claims) = try auth.authenticate(credential: credential) else {
            throw .forbidden("a WebSocket needs a client token (sub = user, did = device)")
        }
        var deviceId = claims.deviceId
        if let requested = request.queryValue("deviceId") {
            guard Identifier.isValidUserOrDeviceId(requested) else { throw .invalid("'deviceId' is not a valid id") }
            if let own = claims.deviceId, own != requested {
                throw .forbidden("the token belongs to another device")
            }
            deviceId = requested
        }
        guard let deviceId else { throw .invalid("the token has no 'did' claim: pass ?deviceId=") }
        let after = try request.integerQuery("after", default: 0, in: 0...Int64.max)
        let epoch = request.queryValue("epoch")
        let background: Bool
        switch request.queryValue("state") {
        case nil, "foreground": background = false
        case "background": background = true
        default: throw .invalid("'state' must be background or foreground")
        }
        if let epoch, epoch.isEmpty || epoch.utf8.count > 64 { throw .invalid("'epoch' must be 1 to 64 characters") }
        let accept: String
        switch WebSocketHandshake.validate(
            method: request.method, header: { request.header($0) }, allowedOrigins: allowedOrigins)
        {
        case .success(let value): accept = value
        case .failure(let refusal):
            let code =
                refusal.status == 426 ? "upgrade_required" : (refusal.status == 403 ? "forbidden" : "bad_handshake")
            throw APIError(
                refusal.status, code, refusal.reason,
                headers: refusal.upgradeRequired ? [("Sec-WebSocket-Version", "13")] : [])
        }
        let userId = claims.userId
        guard live.sessionCount(userId: userId) < config.wsMaxPerUser else {
            throw APIError(
                429, "too_many_connections", "this user already has \(config.wsMaxPerUser) WebSockets open",
                headers: [("Retry-After", "5")])
        }
        if claims.deviceId == nil { try admitNamedDevice(deviceId, of: userId, reply) }
        let live = self.live
        reply.send(
            .switchingProtocols(
                // (libmicrohttpd adds `Connection: Upgrade` itself: a second one made "Upgrade, Upgrade".)
                headers: [("Upgrade", "websocket"), ("Sec-WebSocket-Accept", accept)]
            ) { socket in
                live.open(
                    socket, claims: claims, deviceId: deviceId, after: after, epoch: epoch, background: background)
            })
    }

    /// A token without `did` lets the client name its device (`?deviceId=`, as the SDK does),
    /// and every device named leaves a permanent presence row: a device new to the user is
    /// refused once the user has `maxDevicesPerUser` devices (registered for pushes, seen on a
    /// socket, or connected now). A token with `did` is not counted against it: the chat server
    /// named that device.
    private func admitNamedDevice(_ deviceId: String, of userId: String, _ reply: Reply) throws(APIError) {
        let connected = live.devices(of: userId)
        guard !connected.contains(deviceId) else { return }
        let (registered, seen) = try read(reply) { () throws(StoreError) in
            (try store.devices(userId: userId), try live.lastOnline(userId))
        }
        let known = connected.union(registered.map(\.deviceId)).union(seen.keys)
        guard known.contains(deviceId) || known.count < config.maxDevicesPerUser else {
            throw APIError(
                403, "too_many_devices",
                "this user already has \(config.maxDevicesPerUser) devices: connect as one of them, or delete one")
        }
    }
}
