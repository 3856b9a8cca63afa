import Foundation
package import RelayCore
package import RelayTelemetry

/// Every setting of the relay, each with its default. Loaded from a JSON file, then the
/// environment (`PUSHRELAY_` + upper snake case), then flags (`--kebab-case`); later wins.
package struct RelayConfig: Sendable, Equatable {
    /// The relay's version: `--version`, `GET /v1/stats`, and `openapi.yaml`'s `info.version` (a test checks).
    package static let version = "0.3.0"

    /// `host:port` to bind; port 0 picks a free one. Default loopback only.
    package var listen = "127.0.0.1:8080"
    /// The database: a SQLite file path, or a PostgreSQL URI (`postgresql://…`, `postgres://…`)
    /// shared by every node of a cluster.
    package var db = "./pushrelay.sqlite"
    /// API keys for the chat server. None configured: one is generated and kept in the database.
    package var serverKeys: [String] = []
    /// HS256 secret for client tokens (its UTF-8 bytes are the key). Nil: generated and stored.
    package var clientTokenSecret: String?
    /// `whsec_…` secret for webhook signatures. Nil: generated and stored.
    package var webhookSecret: String?
    /// Hosts, `*.suffix`es, IPs and CIDRs a push or events URL may point at, each with an
    /// optional `:port` or `:*` (none: 80 and 443 only). Empty by default: nothing is reachable
    /// until the operator names the push gateway (`make run` allows loopback for development).
    package var pushAllowedHosts = HostAllowList.none
    /// Where Web Push endpoints may point. They come from browsers (any client token can register
    /// one), so never the server's own `pushAllowedHosts`: by default any host name on port 443
    /// whose addresses are all public.
    package var webPushAllowedHosts = HostAllowList.publicHTTPS
    /// A PEM bundle of the CAs https receivers are verified against; nil for the system's.
    package var pushCaFile: String?
    /// The chat server's event webhook; nil for none.
    package var eventsUrl: PushURL?
    /// On a cluster (PostgreSQL): how long a node that stopped renewing its lease still counts;
    /// after it, the devices it held are offline everywhere.
    package var nodeLeaseMs: Int64 = 15_000
    /// An offline device's push falls due this long after the first message of its window (and
    /// covers the window); also the presence debounce.
    package var pushDelayMs: Int64 = 3000
    /// An online (or caught-up) device's push waits this long for the user's ack.
    package var ackTimeoutMs: Int64 = 10_000
    /// WebSocket ping period.
    package var pingIntervalMs: Int64 = 25_000
    /// Acked messages are kept this long (seconds), and it is the default message TTL.
    package var retentionS: Int64 = 604_800
    /// A push delivery attempt that takes longer fails and is retried.
    package var pushTimeoutMs: Int64 = 10_000
    package var pushRetryBaseMs: Int64 = 1000
    package var pushRetryCapMs: Int64 = 600_000
    /// Largest serialized `payload` of a message.
    package var maxPayloadBytes = 65_536
    /// Largest WebSocket message from a client.
    package var maxWsMessageBytes = 65_536
    /// Largest request body (413 beyond); room for 1000 recipients next to a full payload.
    package var maxBodyBytes = 1 << 20
    /// HTTP worker threads (libmicrohttpd thread pool).
    package var httpThreads = 2
    /// Open client connections at most, WebSockets included.
    package var maxConnections = 10_000
    /// Open connections per client address, WebSockets included; 0 for no cap. Set 0 behind a
    /// reverse proxy (every client then has the proxy's address) and let the proxy cap instead.
    package var maxConnectionsPerIp = 256
    /// Idle HTTP connections are closed after this many seconds without a byte.
    package var connectionTimeoutS = 60
    /// A request head must arrive in full within this time of the connection's accept or its
    /// previous answer (a slow-header client is cut off; an idle keep-alive connection too).
    package var requestHeaderTimeoutMs: Int64 = 20_000
    /// A request body must arrive in full within this time of its head.
    package var requestBodyTimeoutMs: Int64 = 60_000
    /// libmicrohttpd's memory per HTTP connection: bounds the request head (headers beyond it
    /// are refused). WebSockets release theirs once upgraded.
    package var connectionMemoryBytes = 16_384
    /// On SIGTERM, how long requests being handled get to finish; then each still unanswered one
    /// is answered 503 `shutting_down` (its write may still commit) and the process goes on to
    /// exit. Keep drain plus a few seconds under the supervisor's kill timeout (`docker stop`: 10 s).
    package var shutdownDrainMs: Int64 = 10_000
    /// How long `GET /v1/stats` reuses its push job counts: the console polls every 2 s, so one
    /// tab always sees a fresh count; more tabs (or a scraper) share it. 0: read every time.
    package var statsCacheMs: Int64 = 1000
    /// `debug`, `info`, `warning` or `error`.
    package var logLevel = LogLevel.info
    /// One `info` line per request (method, route, path, status, bytes, duration, request id,
    /// client address) and per WebSocket opened and closed.
    package var accessLog = true
    /// Bearer key for `/metrics`; nil leaves it open (bind to loopback or protect at the proxy).
    package var metricsKey: String?
    /// Turns on the Matrix push gateway at `/_matrix/push/v1/notify?secret=<secret>` (the
    /// homeserver cannot send a bearer key; the URL is the credential). Nil: off (404).
    package var matrixNotifySecret: String?
    /// A WebSocket peer silent this long (no data, no pong) is dropped and goes offline.
    package var wsDeadAfterMs: Int64 = 60_000
    /// Bytes queued for a WebSocket that does not read before it is closed with 1008 (it resumes
    /// from its last seq when it reconnects).
    package var wsMaxQueuedBytes = 4 << 20
    /// Browser origins allowed to open a WebSocket; empty allows every origin (native apps send none).
    package var wsAllowedOrigins: [String] = []
    /// Web pages' origins allowed to call the client routes over CORS (exact origins, compared
    /// like `wsAllowedOrigins`); empty (the default): no CORS header at all.
    package var corsAllowedOrigins: [String] = []
    /// Requests per second allowed per server key (token bucket; burst 2×); 0 for no limit.
    package var rateLimitServerPerS = 50_000
    /// Requests per second allowed per client user (token bucket; burst 3×); 0 for no limit.
    package var rateLimitClientPerS = 20
    /// WebSockets open at once per user (a new one beyond it is refused with 429).
    package var wsMaxPerUser = 20
    /// Clients' signals being forwarded to `eventsUrl` at once (each holds a connection until
    /// answered or `pushTimeoutMs`); signals beyond it are dropped and counted
    /// (`pushrelay_signals_total{outcome="dropped"}`). Each user may also send 10 per second.
    package var signalsMaxInFlight = 32
    /// Distinct devices a client may name for its user with `?deviceId=` (tokens without `did`);
    /// a new one beyond it is refused with 403 `too_many_devices`. Devices registered by the
    /// server and tokens with `did` are not limited by it, but count towards it.
    package var maxDevicesPerUser = 100
    /// Frames per second a client may send on its WebSocket (burst 3×) before it is closed with 1008.
    package var wsFramesPerS = 50
    /// Seconds from a write to the retention pruning pass it calls for (then one at the next
    /// expiry, never more often).
    package var pruneIntervalS: Int64 = 60

    // Push services: each is available once its credentials are set (devices naming one that is
    // not get 400 `transport_unavailable`).
    /// APNs token-based auth: the `.p8` key (PEM, P-256), its key id and the team id.
    package var apnsKeyFile: String?
    package var apnsKeyId: String?
    package var apnsTeamId: String?
    /// The bundle id for devices that name no `topic`.
    package var apnsTopic: String?
    package var apnsUrl = PushURL(https: "api.push.apple.com")
    package var apnsSandboxUrl = PushURL(https: "api.sandbox.push.apple.com")
    /// FCM HTTP v1: the service-account JSON Google issues.
    package var fcmServiceAccountFile: String?
    package var fcmUrl = PushURL(https: "fcm.googleapis.com")
    /// Web Push (VAPID, RFC 8292): the P-256 private key (PEM) and the `mailto:`/`https:` subject.
    package var vapidKeyFile: String?
    package var vapidSubject: String?
    /// The operator's other apps, each with push credentials of its own (the top-level ones are
    /// the app `default`): `apps` in the config file, an object keyed by app id.
    package var apps: [AppID: AppSettings] = [:]

    package init() {}

    /// `db` as logs and messages show it: a URI's password masked.
    package var dbForDisplay: String {
        guard db.hasPrefix("postgres") else { return db }
        var shown = db
        // postgresql://user:password@host/…
        if let scheme = shown.range(of: "://"), let at = shown[scheme.upperBound...].firstIndex(of: "@"),
            let colon = shown[scheme.upperBound..<at].firstIndex(of: ":")
        {
            shown.replaceSubrange(shown.index(after: colon)..<at, with: "***")
        }
        // …?password=…
        if let key = shown.range(of: "password=") {
            let end = shown[key.upperBound...].firstIndex(of: "&") ?? shown.endIndex
            shown.replaceSubrange(key.upperBound..<end, with: "***")
        }
        return shown
    }
}

extension RelayConfig {
    /// The app `default`: the top-level push settings.
    package var defaultApp: AppSettings {
        var app = AppSettings()
        app.apnsKeyFile = apnsKeyFile
        app.apnsKeyId = apnsKeyId
        app.apnsTeamId = apnsTeamId
        app.apnsTopic = apnsTopic
        app.fcmServiceAccountFile = fcmServiceAccountFile
        app.vapidKeyFile = vapidKeyFile
        app.vapidSubject = vapidSubject
        return app
    }

    /// An app's settings; nil for an app the configuration does not have.
    package func app(_ id: AppID) -> AppSettings? {
        id == .default ? defaultApp : apps[id]
    }

    /// Every app, `default` first, then by id.
    package var allApps: [(id: AppID, settings: AppSettings)] {
        [(AppID.default, defaultApp)] + apps.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Whether devices of `app` may name this transport.
    package func offers(_ kind: PushTransport.Kind, app: AppID = .default) -> Bool {
        self.app(app)?.offers(kind) ?? false
    }

    /// The app of a device registered for this Matrix pusher `app_id` without naming one: the
    /// app listing it exactly, else the one with the longest matching `prefix.*`, else `default`.
    package func app(matrixAppId appId: String) -> AppID {
        var best: (id: AppID, score: Int)?
        for (id, settings) in allApps {
            guard let match = settings.matches(matrixAppId: appId) else { continue }
            let score = match.exact ? Int.max : match.length
            if score > best?.score ?? -1 { best = (id, score) }
        }
        return best?.id ?? .default
    }

    /// The delivery decisions these settings make.
    package var deliveryPolicy: DeliveryPolicy {
        DeliveryPolicy(
            pushDelayMs: pushDelayMs, ackTimeoutMs: ackTimeoutMs,
            retry: RetryPolicy(baseMilliseconds: pushRetryBaseMs, capMilliseconds: pushRetryCapMs))
    }
}
