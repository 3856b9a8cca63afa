import Foundation
import RelayCore
import RelayCrypto
import RelaySettings
import RelayTransport

/// Every app's push credentials, read once at startup from the files the settings name: a file
/// that is missing or holds no usable key is a configuration error (exit 2), not a failure at
/// the first push. Keys never reach a log line or an error message. A file named by several
/// apps is read once, and its credential shared: one APNs provider token per key, one OAuth
/// token per service account, one VAPID token cache per key.
struct PushServices {
    struct APNs {
        let token: APNsProviderToken.Credentials
        let topic: String?
    }

    struct App {
        var apns: APNs?
        var fcm: FCMServiceAccount?
        var vapid: VAPIDSigner?
    }

    let apps: [AppID: App]

    init(config: RelayConfig) throws(ConfigLoader.Error) {
        var files = CredentialFiles()
        var apps: [AppID: App] = [:]
        for (id, settings) in config.allApps {
            do {
                apps[id] = try Self.app(settings, files: &files)
            } catch {
                throw id == .default ? error : ConfigLoader.Error(description: "apps.\(id): \(error.description)")
            }
        }
        self.apps = apps
    }

    private static func app(_ settings: AppSettings, files: inout CredentialFiles) throws(ConfigLoader.Error) -> App {
        var app = App()
        if let file = settings.apnsKeyFile, let keyId = settings.apnsKeyId, let teamId = settings.apnsTeamId {
            let key = try files.p256(file, "apnsKeyFile", "holds no P-256 private key (a .p8 file)")
            app.apns = APNs(token: .init(key: key, keyId: keyId, teamId: teamId), topic: settings.apnsTopic)
        }
        if let file = settings.fcmServiceAccountFile {
            app.fcm = try files.serviceAccount(file)
        }
        if let file = settings.vapidKeyFile, let subject = settings.vapidSubject {
            app.vapid = try files.vapid(file, subject: subject)
        }
        return app
    }

    /// The VAPID public key of each app with Web Push (`GET /v1/webpush/key?app=`).
    var vapidPublicKeys: [AppID: String] { apps.compactMapValues { $0.vapid?.publicKey } }

    /// The HTTP/2 client APNs needs, when an app has APNs: one for every app and team (its
    /// connections are kept per team).
    func apnsClient(config: RelayConfig) throws -> HTTP2Client? {
        guard apps.values.contains(where: { $0.apns != nil }) else { return nil }
        var settings = HTTP2Client.Settings()
        settings.requestTimeoutMs = Int(config.pushTimeoutMs)
        return try HTTP2Client(tls: try TLSContext(caFile: config.pushCaFile, alpn: ["h2"]), settings: settings)
    }

    /// The providers of each app's services with credentials, on the notifier's HTTP sender
    /// (APNs on its HTTP/2 client).
    func providers(
        config: RelayConfig, sender: HTTPSender, apnsClient: HTTP2Client?, now: @escaping @Sendable () -> Timestamp
    ) -> [ProviderKey: any PushProvider] {
        var providers: [ProviderKey: any PushProvider] = [:]
        var tokens: [String: APNsProviderToken] = [:]
        var accounts: [String: FCMProvider] = [:]
        for (id, app) in apps {
            if let vapid = app.vapid {
                providers[ProviderKey(.webPush, app: id)] = WebPushProvider(sender: sender, vapid: vapid, app: id)
            }
            if let fcm = app.fcm {
                let provider =
                    accounts[fcm.clientEmail]
                    ?? FCMProvider(account: fcm, service: config.fcmUrl, sender: sender, now: now)
                accounts[fcm.clientEmail] = provider
                providers[ProviderKey(.fcm, app: id)] = provider
            }
            if let apns = app.apns, let client = apnsClient {
                let key = "\(apns.token.teamId)/\(apns.token.keyId)"
                let token = tokens[key] ?? APNsProviderToken(credentials: apns.token, now: now)
                tokens[key] = token
                providers[ProviderKey(.apns, app: id)] = APNsProvider(
                    token: token, defaultTopic: apns.topic, production: config.apnsUrl,
                    sandbox: config.apnsSandboxUrl, client: client)
            }
        }
        return providers
    }
}

/// The credential files read so far, each once.
private struct CredentialFiles {
    private var keys: [String: P256Key] = [:]
    private var accounts: [String: FCMServiceAccount] = [:]
    private var signers: [String: VAPIDSigner] = [:]

    mutating func p256(_ path: String, _ setting: String, _ problem: String) throws(ConfigLoader.Error) -> P256Key {
        if let key = keys[path] { return key }
        let text = try Self.read(path, setting)
        guard let key = try? P256Key(pem: text) else {
            throw ConfigLoader.Error(description: "\(setting) \(path) \(problem)")
        }
        keys[path] = key
        return key
    }

    mutating func serviceAccount(_ path: String) throws(ConfigLoader.Error) -> FCMServiceAccount {
        if let account = accounts[path] { return account }
        let text = try Self.read(path, "fcmServiceAccountFile")
        do {
            let account = try FCMServiceAccount(json: Array(text.utf8))
            accounts[path] = account
            return account
        } catch {
            throw ConfigLoader.Error(description: "fcmServiceAccountFile \(path): \(error)")
        }
    }

    mutating func vapid(_ path: String, subject: String) throws(ConfigLoader.Error) -> VAPIDSigner {
        let name = "\(path)\u{0}\(subject)"
        if let signer = signers[name] { return signer }
        let signer = VAPIDSigner(
            key: try p256(path, "vapidKeyFile", "holds no P-256 private key (PEM)"), subject: subject)
        signers[name] = signer
        return signer
    }

    private static func read(_ path: String, _ setting: String) throws(ConfigLoader.Error) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigLoader.Error(description: "\(setting): cannot read \(path)")
        }
        return text
    }
}
