import RelayPrimitives

/// How a device is reached when it is not online: the signed webhook, or a push service the
/// relay speaks itself. A device has exactly one. Parsed once from the device's JSON (the API
/// body, and the same JSON as stored), so a stored transport is always one the API accepted.
package enum PushTransport: Sendable, Equatable {
    case webhook(PushURL)
    case apns(APNsDevice)
    case fcm(FCMDevice)
    case webPush(WebPushSubscription)

    package struct APNsDevice: Sendable, Equatable {
        /// The device token, lower-case hex.
        package var token: String
        /// The app's PushKit token (lower-case hex), when it has calls: a call goes there as a
        /// `voip` push, and nothing else does.
        package var voipToken: String?
        /// The app's bundle id; `nil` means the relay's `apnsTopic`.
        package var topic: String?
        /// As the app named it; nil when it named none: production, and sandbox tried too when
        /// production refuses the token (a development build's token is BadDeviceToken there).
        package var environment: Environment?
        package var app: AppID = .default

        /// Where its pushes go first.
        package var endpoint: Environment { environment ?? .production }

        package enum Environment: String, Sendable, Equatable {
            case production
            case sandbox
        }
    }

    package struct FCMDevice: Sendable, Equatable {
        /// The registration token.
        package var token: String
        package var app: AppID = .default

        package init(token: String, app: AppID = .default) {
            self.token = token
            self.app = app
        }
    }

    /// A browser's `PushSubscription.toJSON()`: its endpoint and its ECDH key and auth secret.
    package struct WebPushSubscription: Sendable, Equatable {
        package var endpoint: PushURL
        /// The uncompressed P-256 point (65 bytes).
        package var p256dh: [UInt8]
        /// 16 bytes.
        package var auth: [UInt8]
        /// Whose VAPID key the browser subscribed with (push services refuse any other's).
        package var app: AppID = .default
    }

    /// The operator's app whose credentials sign this device's pushes; a webhook's is `default`
    /// (the webhook secret is the relay's, so setting another app on it changes nothing).
    package var app: AppID {
        get {
            switch self {
            case .webhook: return .default
            case .apns(let device): return device.app
            case .fcm(let device): return device.app
            case .webPush(let subscription): return subscription.app
            }
        }
        set {
            switch self {
            case .webhook: break
            case .apns(var device):
                device.app = newValue
                self = .apns(device)
            case .fcm(var device):
                device.app = newValue
                self = .fcm(device)
            case .webPush(var subscription):
                subscription.app = newValue
                self = .webPush(subscription)
            }
        }
    }

    /// Which transport, for the device's JSON, metrics and logs.
    package enum Kind: String, Sendable, CaseIterable {
        case webhook
        case apns
        case fcm
        case webPush
    }

    package var kind: Kind {
        switch self {
        case .webhook: return .webhook
        case .apns: return .apns
        case .fcm: return .fcm
        case .webPush: return .webPush
        }
    }

    /// The device's address as a trace or log shows it: a token's first 8 characters (a token is
    /// a credential of sorts: enough to tell two apart), a URL's origin.
    package var shortened: String {
        switch self {
        case .webhook(let url): return url.origin
        case .apns(let device): return String(device.token.prefix(8)) + "…"
        case .fcm(let device): return String(device.token.prefix(8)) + "…"
        case .webPush(let subscription): return subscription.endpoint.origin
        }
    }

    /// The URL the relay itself connects to for this device, when the device chose it (a webhook
    /// or a browser's push service): the SSRF guard and the allow-list apply to it. APNs and FCM
    /// hosts come from the operator's settings.
    package var clientChosenURL: PushURL? {
        switch self {
        case .webhook(let url): return url
        case .webPush(let subscription): return subscription.endpoint
        case .apns, .fcm: return nil
        }
    }

    // MARK: Parsing

    /// The transport named by a device body: exactly one of `pushUrl`, `apns`, `fcm`, `webPush`,
    /// and the `app` whose credentials it is for (absent: `default`).
    package init(device fields: FieldReader) throws(ValidationError) {
        var app = AppID.default
        if let value = fields.value("app") {
            guard let text = value.stringValue, let named = AppID(text) else {
                throw ValidationError(
                    .invalidField, field: "app", "'app' must be an app id: 1 to 64 of A-Z a-z 0-9 . _ -")
            }
            app = named
        }
        let named = Kind.allCases.filter { fields.value($0.member) != nil }
        guard named.count == 1, let kind = named.first else {
            throw Self.invalid(
                "$",
                named.isEmpty
                    ? "a device needs one transport: 'pushUrl', 'apns', 'fcm' or 'webPush'"
                    : "a device has one transport, not \(named.map { "'\($0.member)'" }.joined(separator: " and "))")
        }
        switch kind {
        case .webhook:
            // The webhook is signed with the relay's own secret: no app's credentials apply.
            guard app == .default else {
                throw Self.invalid("app", "a 'pushUrl' device belongs to no app; 'app' is for push services")
            }
            self = .webhook(try PushURL(try fields.string("pushUrl")))
        case .apns:
            let body = try FieldReader(Self.object(fields, "apns"))
            try body.refusingUnknown(["token", "voipToken", "topic", "environment"], in: "apns")
            var device = try Self.asTransport { () throws(ValidationError) in try Self.apns(body) }
            device.app = app
            self = .apns(device)
        case .fcm:
            let body = try FieldReader(Self.object(fields, "fcm"))
            try body.refusingUnknown(["token"], in: "fcm")
            let token = try Self.asTransport { () throws(ValidationError) in try body.string("token") }
            guard (1...4096).contains(token.utf8.count),
                token.utf8.allSatisfy({ Self.isTokenCharacter($0) })
            else { throw Self.invalid("fcm.token", "'fcm.token' must be an FCM registration token (1 to 4096 bytes)") }
            self = .fcm(FCMDevice(token: token, app: app))
        case .webPush:
            var subscription = try Self.asTransport { () throws(ValidationError) in
                try Self.webPush(try FieldReader(Self.object(fields, "webPush")))
            }
            subscription.app = app
            self = .webPush(subscription)
        }
    }

    /// A push service's member that is missing or mistyped is an invalid transport, with the
    /// field reader's message.
    private static func asTransport<T>(_ read: () throws(ValidationError) -> T) throws(ValidationError) -> T {
        do {
            return try read()
        } catch {
            throw ValidationError(.invalidTransport, field: error.field, error.message)
        }
    }

    private static func apns(_ fields: FieldReader) throws(ValidationError) -> APNsDevice {
        let token = try appleToken(try fields.string("token"), "apns.token")
        var voipToken: String?
        if let value = fields.value("voipToken") {
            guard let text = value.stringValue else {
                throw invalid("apns.voipToken", "'apns.voipToken' must be the PushKit token in hex (64 to 200 digits)")
            }
            voipToken = try appleToken(text, "apns.voipToken")
        }
        var topic: String?
        if let value = fields.value("topic") {
            guard let text = value.stringValue, (1...255).contains(text.utf8.count),
                text.utf8.allSatisfy({ isTokenCharacter($0) || $0 == UInt8(ascii: ".") })
            else { throw invalid("apns.topic", "'apns.topic' must be a bundle id such as com.example.chat") }
            topic = text
        }
        var environment: APNsDevice.Environment?
        if let value = fields.value("environment") {
            guard let text = value.stringValue, let parsed = APNsDevice.Environment(rawValue: text) else {
                throw invalid("apns.environment", "'apns.environment' must be 'production' or 'sandbox'")
            }
            environment = parsed
        }
        return APNsDevice(token: token, voipToken: voipToken, topic: topic, environment: environment)
    }

    /// An APNs or PushKit token, lower-cased: 32 bytes today; Apple says they may grow, so up to 100.
    private static func appleToken(_ text: String, _ field: String) throws(ValidationError) -> String {
        let token = text.lowercased()
        guard token.utf8.count % 2 == 0, (64...200).contains(token.utf8.count),
            token.utf8.allSatisfy({
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            })
        else {
            throw invalid(
                field,
                "'\(field)' must be the \(field == "apns.token" ? "device" : "PushKit") token in hex (64 to 200 digits)"
            )
        }
        return token
    }

    private static func webPush(_ fields: FieldReader) throws(ValidationError) -> WebPushSubscription {
        let endpoint: PushURL
        do {
            endpoint = try PushURL(try fields.string("endpoint"))
        } catch {
            throw invalid("webPush.endpoint", "'webPush.endpoint' must be the subscription's https URL")
        }
        guard endpoint.scheme == "https" else {
            throw invalid("webPush.endpoint", "'webPush.endpoint' must be an https URL")
        }
        let keys = try FieldReader(object(fields, "keys", in: "webPush"))
        guard let p256dh = Self.base64URL(try keys.string("p256dh")), p256dh.count == 65, p256dh.first == 4
        else {
            throw invalid(
                "webPush.keys.p256dh", "'webPush.keys.p256dh' must be an uncompressed P-256 point in base64url")
        }
        guard let auth = Self.base64URL(try keys.string("auth")), auth.count == 16 else {
            throw invalid("webPush.keys.auth", "'webPush.keys.auth' must be 16 bytes in base64url")
        }
        return WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    private static func object(
        _ fields: FieldReader, _ name: String, in parent: String? = nil
    ) throws(ValidationError)
        -> JSONValue
    {
        let path = parent.map { "\($0).\(name)" } ?? name
        guard let value = fields.value(name) else { throw invalid(path, "'\(path)' is required") }
        guard case .object = value else { throw invalid(path, "'\(path)' must be an object, not \(value.kindName)") }
        return value
    }

    /// Browsers give keys unpadded (the Push API's `toJSON()`); a padded one is taken too.
    private static func base64URL(_ text: String) -> [UInt8]? {
        Base64.decode(text.utf8.last == UInt8(ascii: "=") ? String(text.prefix { $0 != "=" }) : text, .url)
    }

    /// FCM tokens and bundle ids: letters, digits, `-`, `_`, `:`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"):
            return true
        default: return false
        }
    }

    private static func invalid(_ field: String, _ message: String) -> ValidationError {
        ValidationError(.invalidTransport, field: field, message)
    }

    // MARK: Writing

    /// The transport as the device's JSON carries it: `"pushUrl": "…"`, or `"apns": {…}` etc.
    /// (the same members the API accepts, so that the stored form parses back the same).
    package func write(to writer: inout JSONWriter) {
        switch self {
        case .webhook(let url):
            writer.member("pushUrl", url.text)
        case .apns(let device):
            writer.key("apns")
            writer.beginObject()
            writer.member("token", device.token)
            if let voipToken = device.voipToken { writer.member("voipToken", voipToken) }
            if let topic = device.topic { writer.member("topic", topic) }
            if let environment = device.environment { writer.member("environment", environment.rawValue) }
            writer.endObject()
        case .fcm(let device):
            writer.key("fcm")
            writer.beginObject()
            writer.member("token", device.token)
            writer.endObject()
        case .webPush(let subscription):
            writer.key("webPush")
            writer.beginObject()
            writer.member("endpoint", subscription.endpoint.text)
            writer.key("keys")
            writer.beginObject()
            writer.member("p256dh", Base64.encode(subscription.p256dh, .url))
            writer.member("auth", Base64.encode(subscription.auth, .url))
            writer.endObject()
            writer.endObject()
        }
    }

    /// The stored form (the devices' `transport` column): a webhook's URL as written, so rows
    /// from before the push services read the same; any other transport as its JSON object, with
    /// its `app` when not `default` (so rows from before apps read as `default`).
    package var target: String {
        if case .webhook(let url) = self { return url.text }
        var writer = JSONWriter()
        writer.beginObject()
        write(to: &writer)
        if app != .default { writer.member("app", app.name) }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Reads the stored form back (`nil` if it does not parse: a row written by hand).
    package init?(target: String) {
        guard target.utf8.first == UInt8(ascii: "{") else {
            guard let url = try? PushURL(target) else { return nil }
            self = .webhook(url)
            return
        }
        guard let json = try? JSONParser.parse(Array(target.utf8)), let fields = try? FieldReader(json),
            let transport = try? PushTransport(device: fields)
        else { return nil }
        self = transport
    }
}

extension PushTransport.Kind {
    /// The device body's member naming this transport.
    package var member: String { self == .webhook ? "pushUrl" : rawValue }
}
