import RelayCore
import RelayCrypto
import RelayHTTP
import RelayLive
import RelaySettings
import RelayStore

extension RelayAPI {
    /// The members a device body may have: a typo ("enviroment") is refused, never ignored.
    static let deviceMembers: Set<String> = [
        "pushUrl", "apns", "fcm", "webPush", "platform", "contentFree", "matrix", "app",
    ]

    /// `PUT /v1/users/{userId}/devices/{deviceId} {pushUrl | apns | fcm | webPush, platform?,
    /// contentFree?, matrix?}`: registers or updates a push device (201 created, 200 updated;
    /// re-enables a disabled one). The server registers any device, and its PUT replaces the
    /// device whole; a client token only its own (`sub`/`did`), only with a push service's token
    /// (never a `pushUrl`, which would let an app point the relay at any URL, nor a Matrix pusher,
    /// nor an APNs topic other than `apnsTopic`, which the team key would sign for), and its PUT
    /// changes what it names: the fields it leaves out keep their values (the server's
    /// `contentFree`, `platform` and pusher survive the app's `setPushToken`).
    func putDevice(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let userId = try request.identifier("userId")
        let deviceId = try request.identifier("deviceId")
        let principal = try auth.requireUser(request, userId: userId)
        let json = try request.jsonBody()
        let (parsed, platform, contentFree, matrix, namesApp) = try APIError.validating {
            () throws(ValidationError) in
            let fields = try FieldReader(json)
            try fields.refusingUnknown(Self.deviceMembers)
            return (
                try PushTransport(device: fields), try fields.optionalString("platform", maxLength: 32),
                try fields.optionalBool("contentFree"), try Self.matrixPusher(fields.optionalObject("matrix")),
                fields.value("app") != nil
            )
        }
        var transport = parsed
        // A Matrix pusher's device with no app of its own: the app listing the pusher's app_id.
        if !namesApp, let matrix, transport.kind != .webhook {
            transport.app = config.app(matrixAppId: matrix.appId)
        }
        guard let app = config.app(transport.app) else {
            throw APIError(400, "transport_unavailable", "this relay has no app '\(transport.app)'")
        }
        var keeping: DeviceFields = []
        if case .client(let claims) = principal {
            guard claims.deviceId == deviceId else {
                throw .forbidden("a client token may only register its own device (the token's 'did')")
            }
            guard transport.kind != .webhook, matrix == nil else {
                throw .forbidden(
                    "a client token may register an 'apns', 'fcm' or 'webPush' token, not a 'pushUrl' or 'matrix'")
            }
            keeping = [.matrix]
            if platform == nil { keeping.insert(.platform) }
            if contentFree == nil { keeping.insert(.contentFree) }
        }
        guard app.offers(transport.kind) else {
            throw APIError(
                400, "transport_unavailable",
                transport.app == .default
                    ? "this relay has no credentials for '\(transport.kind.member)'; see docs/CONFIGURATION.md"
                    : "app '\(transport.app)' has no credentials for '\(transport.kind.member)'; "
                        + "see docs/CONFIGURATION.md")
        }
        if let url = transport.clientChosenURL {
            let webPush = transport.kind == .webPush
            guard (webPush ? config.webPushAllowedHosts : allowList).allows(host: url.host, port: url.port) else {
                throw APIError(
                    400, "push_url_not_allowed",
                    webPush
                        ? "the Web Push endpoint's host or port is not allowed by PUSHRELAY_WEB_PUSH_ALLOWED_HOSTS "
                            + "(default: any public host on port 443)"
                        : "the push URL's host or port is not allowed; add 'host:port' to PUSHRELAY_PUSH_ALLOWED_HOSTS")
            }
        }
        if case .client = principal, case .apns(let device) = transport, let topic = device.topic,
            topic != app.apnsTopic
        {
            throw .forbidden("a client token may name no 'apns.topic' but its app's apnsTopic")
        }
        if case .webPush(let subscription) = transport, !P256Key.isPublicPoint(subscription.p256dh) {
            throw .validation(
                ValidationError(
                    .invalidTransport, field: "webPush.keys.p256dh",
                    "'webPush.keys.p256dh' is not a point on P-256: no push could be encrypted to it"))
        }
        let now = clock.now()
        let device = Device(
            userId: userId, deviceId: deviceId, target: transport.target, platform: platform,
            contentFree: contentFree ?? false, createdAt: now, updatedAt: now, matrix: matrix)
        store.putDevice(
            device, keeping: keeping,
            completion: onStore(reply) { (result: (device: Device, created: Bool)) in
                var writer = JSONWriter()
                writer.device(result.device)
                reply.json(result.created ? 201 : 200, writer.bytes)
            })
    }

    /// `"matrix": {"appId", "pushkey"}`: the Matrix pusher this device stands for (its notifies
    /// address it by these; `POST /_matrix/push/v1/notify`).
    static func matrixPusher(_ value: JSONValue?) throws(ValidationError) -> MatrixPusher? {
        guard let value else { return nil }
        let fields = try FieldReader(value)
        try fields.refusingUnknown(["appId", "pushkey"], in: "matrix")
        let appId = try fields.optionalString("appId", maxLength: 4 * MatrixNotification.maxAppIdCharacters)
        let pushkey = try fields.optionalString("pushkey", maxLength: 4 * MatrixNotification.maxPushkeyCharacters)
        guard let appId, let pushkey else {
            throw ValidationError(.missingField, field: "matrix", "'matrix' needs 'appId' and 'pushkey'")
        }
        guard appId.unicodeScalars.count <= MatrixNotification.maxAppIdCharacters,
            pushkey.unicodeScalars.count <= MatrixNotification.maxPushkeyCharacters
        else {
            throw ValidationError(
                .invalidField, field: "matrix",
                "'appId' is at most \(MatrixNotification.maxAppIdCharacters) characters, 'pushkey' at most "
                    + "\(MatrixNotification.maxPushkeyCharacters)")
        }
        return MatrixPusher(appId: appId, pushkey: pushkey)
    }

    /// `POST /v1/devices/reenable {reason, since}`: re-enables every device disabled since `since`
    /// (RFC 3339) with a reason starting with `reason` — the way back after a configuration
    /// mistake made a push service refuse good tokens. Server key only. 200 `{"reenabled": N}`.
    func reenableDevices(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        let (reason, since) = try APIError.validating { () throws(ValidationError) in
            let fields = try FieldReader(json)
            try fields.refusingUnknown(["reason", "since"])
            let reason = try fields.string("reason")
            guard !reason.isEmpty, reason.utf8.count <= 200 else {
                throw ValidationError(.invalidField, field: "reason", "'reason' is 1 to 200 bytes")
            }
            let text = try fields.string("since")
            guard let since = Timestamp(rfc3339: text) else {
                throw ValidationError(.invalidField, field: "since", "'since' must be an RFC 3339 time in UTC (…Z)")
            }
            return (reason, since)
        }
        store.reenableDevices(
            reason: reason, since: since, now: clock.now(),
            completion: onStore(reply) { (count: Int) in
                var writer = JSONWriter()
                writer.beginObject()
                writer.member("reenabled", Int64(count))
                writer.endObject()
                reply.json(200, writer.bytes)
            })
    }

    /// `GET /v1/webpush/key?app=ID`: the VAPID public key a page of that app (absent: `default`)
    /// passes to `pushManager.subscribe` as `applicationServerKey`. Public by design (no
    /// credentials); 404 for an app the relay does not have, or one without Web Push.
    func getWebPushKey(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        let named = request.queryValue("app")
        guard let app = named.map(AppID.init) ?? .default, config.app(app) != nil else {
            throw APIError(404, "not_found", "this relay has no app '\(named ?? "")'")
        }
        guard let key = vapidPublicKeys[app] else {
            throw APIError(
                404, "not_found",
                app == .default
                    ? "Web Push is not configured on this relay (vapidKeyFile, vapidSubject)"
                    : "app '\(app)' has no Web Push credentials (apps.\(app).vapidKeyFile, vapidSubject)")
        }
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("publicKey", key)
        writer.endObject()
        reply.json(200, writer.bytes)
    }

    /// `DELETE /v1/users/{userId}/devices/{deviceId}`: 204 whether or not it existed (idempotent).
    func deleteDevice(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let userId = try request.identifier("userId")
        let deviceId = try request.identifier("deviceId")
        let time = clock.now()
        let revocations = auth.revocations
        let live = self.live
        store.deleteDevice(
            userId: userId, deviceId: deviceId, at: time,
            completion: onStore(reply) { (_: Bool) in
                // Revoked once durable: its tokens stop working, its open sockets are closed.
                revocations.revoke(userId: userId, deviceId: deviceId, atSeconds: time.seconds)
                live.close(userId: userId, deviceId: deviceId, reason: "device deleted")
                reply.noContent()
            })
    }

    /// `GET /v1/users/{userId}/devices`.
    func listDevices(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let userId = try request.identifier("userId")
        let devices = try read(reply) { () throws(StoreError) in try store.devices(userId: userId) }
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("devices")
        writer.beginArray()
        for device in devices { writer.device(device) }
        writer.endArray()
        writer.endObject()
        reply.json(200, writer.bytes)
    }

    /// `POST /v1/tokens {userId, deviceId, ttl?}`: mints a client token (HS256).
    func postToken(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        let (userId, deviceId, ttl) = try APIError.validating { () throws(ValidationError) in
            let fields = try FieldReader(json)
            return (
                try fields.identifier("userId"), try fields.identifier("deviceId"),
                try fields.optionalInteger("ttl", in: ClientClaims.mintedLifetimes) ?? ClientClaims.defaultLifetime
            )
        }
        let issuedAt = clock.now().seconds
        let claims = ClientClaims(userId: userId, deviceId: deviceId, expiresAt: issuedAt + ttl, issuedAt: issuedAt)
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("token", auth.tokens.encode(claims))
        writer.member("expiresAt", Timestamp(milliseconds: claims.expiresAt * 1000))
        writer.endObject()
        reply.json(200, writer.bytes)
    }
}
