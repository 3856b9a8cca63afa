import Foundation
import RelayCore
import RelayCrypto
import RelaySettings
import RelayTransport

/// The push services' credentials, read once at startup from the files the settings name: a
/// file that is missing or holds no usable key is a configuration error (exit 2), not a
/// failure at the first push. Keys never reach a log line or an error message.
struct PushServices {
    struct APNs {
        let key: P256Key
        let keyId: String
        let teamId: String
    }

    let apns: APNs?
    let fcm: FCMServiceAccount?
    let vapid: VAPIDSigner?

    init(config: RelayConfig) throws(ConfigLoader.Error) {
        if let file = config.apnsKeyFile, let keyId = config.apnsKeyId, let teamId = config.apnsTeamId {
            let key: P256Key
            do {
                key = try P256Key(pem: try Self.read(file, "apnsKeyFile"))
            } catch let error as ConfigLoader.Error {
                throw error
            } catch {
                throw ConfigLoader.Error(description: "apnsKeyFile \(file) holds no P-256 private key (a .p8 file)")
            }
            apns = APNs(key: key, keyId: keyId, teamId: teamId)
        } else {
            apns = nil
        }
        if let file = config.fcmServiceAccountFile {
            do {
                fcm = try FCMServiceAccount(json: Array(try Self.read(file, "fcmServiceAccountFile").utf8))
            } catch let error as ConfigLoader.Error {
                throw error
            } catch {
                throw ConfigLoader.Error(description: "fcmServiceAccountFile \(file): \(error)")
            }
        } else {
            fcm = nil
        }
        if let file = config.vapidKeyFile, let subject = config.vapidSubject {
            do {
                vapid = VAPIDSigner(key: try P256Key(pem: try Self.read(file, "vapidKeyFile")), subject: subject)
            } catch let error as ConfigLoader.Error {
                throw error
            } catch {
                throw ConfigLoader.Error(description: "vapidKeyFile \(file) holds no P-256 private key (PEM)")
            }
        } else {
            vapid = nil
        }
    }

    private static func read(_ path: String, _ setting: String) throws(ConfigLoader.Error) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigLoader.Error(description: "\(setting): cannot read \(path)")
        }
        return text
    }

    /// The HTTP/2 client APNs needs, when APNs is configured.
    func apnsClient(config: RelayConfig) throws -> HTTP2Client? {
        guard apns != nil else { return nil }
        var settings = HTTP2Client.Settings()
        settings.requestTimeoutMs = Int(config.pushTimeoutMs)
        return try HTTP2Client(tls: try TLSContext(caFile: config.pushCaFile, alpn: ["h2"]), settings: settings)
    }

    /// The providers of the services with credentials, on the notifier's HTTP sender (APNs on
    /// its HTTP/2 client).
    func providers(
        config: RelayConfig, sender: HTTPSender, apnsClient: HTTP2Client?, now: @escaping @Sendable () -> Timestamp
    ) -> [PushTransport.Kind: any PushProvider] {
        var providers: [PushTransport.Kind: any PushProvider] = [:]
        if let vapid { providers[.webPush] = WebPushProvider(sender: sender, vapid: vapid) }
        if let fcm { providers[.fcm] = FCMProvider(account: fcm, service: config.fcmUrl, sender: sender, now: now) }
        if let apns, let client = apnsClient {
            providers[.apns] = APNsProvider(
                credentials: .init(key: apns.key, keyId: apns.keyId, teamId: apns.teamId),
                defaultTopic: config.apnsTopic,
                production: config.apnsUrl, sandbox: config.apnsSandboxUrl, client: client, now: now)
        }
        return providers
    }
}
