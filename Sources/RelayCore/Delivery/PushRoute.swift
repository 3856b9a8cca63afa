/// What a push's delivery slots and circuit breaker are kept per. Never shared between
/// transports: Chrome's Web Push endpoints live on FCM's own `host:port` (and Safari's on
/// `*.push.apple.com`), so a breaker per host alone let one user's failing subscriptions hold
/// every Android push. A push service of the operator's is kept per credential as well, so that
/// one key or topic refused never pauses another.
package struct PushRoute: Hashable, Sendable, CustomStringConvertible {
    package var transport: PushTransport.Kind
    /// The operator's credential the push is signed with (APNs key id and topic, FCM project);
    /// nil for a URL the client chose (webhook, Web Push), kept per origin.
    package var credential: String?
    /// `host:port`.
    package var host: String

    package init(_ transport: PushTransport.Kind, credential: String? = nil, host: String) {
        self.transport = transport
        self.credential = credential
        self.host = host
    }

    /// `webPush fcm.googleapis.com:443`, `apns KEYID/com.example.chat api.push.apple.com:443`.
    package var description: String {
        "\(transport.rawValue) " + (credential.map { "\($0) " } ?? "") + host
    }
}
