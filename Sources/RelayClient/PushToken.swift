public import Foundation

/// The token the OS gave the app for its push service; ``RelayClient/setPushToken(_:)``
/// registers it as this device's transport, so that the relay pushes to it when the app is
/// not live.
public enum PushToken: Sendable, Equatable {
    /// APNs: the device token in hex, the app's bundle id (nil: the relay's `apnsTopic`), and
    /// its environment: `sandbox` for development builds, nil when the app does not say (the
    /// relay sends to production, and tries the sandbox before it gives a token up). An app with
    /// calls adds its PushKit token (hex): calls ring there, everything else goes to the first.
    case apns(String, topic: String? = nil, environment: APNsEnvironment? = nil, voipToken: String? = nil)
    /// FCM: the registration token.
    case fcm(String)
    /// Web Push: the browser's `PushSubscription` (its endpoint, `keys.p256dh`, `keys.auth`).
    case webPush(endpoint: URL, p256dh: String, auth: String)

    public enum APNsEnvironment: String, Sendable {
        case production
        case sandbox
    }

    /// APNs from the `Data` that `didRegisterForRemoteNotificationsWithDeviceToken` hands over
    /// (and PushKit's `pushRegistry(_:didUpdate:for:)`, for `voipToken`).
    public static func apns(
        deviceToken: Data, topic: String? = nil, environment: APNsEnvironment? = nil, voipToken: Data? = nil
    ) -> PushToken {
        .apns(
            hex(deviceToken), topic: topic, environment: environment, voipToken: voipToken.map { hex($0) })
    }

    private static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    /// The device body of `PUT /v1/users/{userId}/devices/{deviceId}`.
    var body: [String: Any] {
        switch self {
        case .apns(let token, let topic, let environment, let voipToken):
            // Only what the app set: the relay keeps what the server registered for the rest.
            var apns: [String: Any] = ["token": token]
            if let voipToken { apns["voipToken"] = voipToken }
            if let environment { apns["environment"] = environment.rawValue }
            if let topic { apns["topic"] = topic }
            return ["apns": apns]
        case .fcm(let token):
            return ["fcm": ["token": token]]
        case .webPush(let endpoint, let p256dh, let auth):
            return ["webPush": ["endpoint": endpoint.absoluteString, "keys": ["p256dh": p256dh, "auth": auth]]]
        }
    }
}

/// Why ``RelayClient/setPushToken(_:)`` did not register the token.
public enum PushTokenError: Error, Sendable, Equatable {
    /// Neither the configuration nor the call names the device (tokens without `did`).
    case noDeviceId
    /// The relay answered with this status and error code (e.g. 400 `transport_unavailable`:
    /// the relay has no credentials for that push service).
    case refused(status: Int, code: String?)
    /// No answer (network, timeout).
    case unreachable
}
