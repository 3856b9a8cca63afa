package import RelayCore

/// One app's push credentials: the settings that exist at the top level for the app `default`
/// (`apps` in the config file names the others). A service is offered to an app once its set is
/// complete; `ConfigLoader.validatePushServices` checks each set.
package struct AppSettings: Sendable, Equatable {
    /// APNs token-based auth: the `.p8` key (PEM, P-256), its key id and the team id.
    package var apnsKeyFile: String?
    package var apnsKeyId: String?
    package var apnsTeamId: String?
    /// The bundle id for devices that name no `topic`.
    package var apnsTopic: String?
    /// FCM HTTP v1: the service-account JSON Google issues.
    package var fcmServiceAccountFile: String?
    /// Web Push (VAPID, RFC 8292): the P-256 private key (PEM) and the `mailto:`/`https:` subject.
    package var vapidKeyFile: String?
    package var vapidSubject: String?
    /// Matrix pushers' `app_id`s that select this app for a device registered with no `app`:
    /// exact ids, or `prefix.*` (any id that starts with `prefix.`).
    package var matrixAppIds: [String] = []

    package init() {}

    /// The members an app's object may have in `apps` (key paths to stored properties are immutable).
    nonisolated(unsafe) static let members: [(String, WritableKeyPath<AppSettings, String?>)] = [
        ("apnsKeyFile", \.apnsKeyFile), ("apnsKeyId", \.apnsKeyId), ("apnsTeamId", \.apnsTeamId),
        ("apnsTopic", \.apnsTopic), ("fcmServiceAccountFile", \.fcmServiceAccountFile),
        ("vapidKeyFile", \.vapidKeyFile), ("vapidSubject", \.vapidSubject),
    ]

    /// Whether devices of this app may name this transport: the webhook always, a push service
    /// once its credentials are set.
    package func offers(_ kind: PushTransport.Kind) -> Bool {
        switch kind {
        case .webhook: return true
        case .apns: return apnsKeyFile != nil
        case .fcm: return fcmServiceAccountFile != nil
        case .webPush: return vapidKeyFile != nil
        }
    }

    /// Whether a Matrix pusher's `app_id` is one of `matrixAppIds`; `exact` tells an exact id
    /// from a pattern's match (an exact id wins over any pattern).
    func matches(matrixAppId appId: String) -> (exact: Bool, length: Int)? {
        var best: (exact: Bool, length: Int)?
        for pattern in matrixAppIds {
            if pattern == appId { return (true, pattern.utf8.count) }
            let prefix = pattern.dropLast()  // `prefix.`
            if pattern.hasSuffix(".*"), appId.hasPrefix(prefix), prefix.utf8.count > best?.length ?? -1 {
                best = (false, prefix.utf8.count)
            }
        }
        return best
    }

    var json: JSONValue {
        var members: [(String, JSONValue)] = Self.members.compactMap { key, path in
            self[keyPath: path].map { (key, .string($0)) }
        }
        if !matrixAppIds.isEmpty { members.append(("matrixAppIds", .array(matrixAppIds.map { .string($0) }))) }
        return .object(members)
    }
}
