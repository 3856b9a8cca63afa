import RelayCore

/// What an FCM HTTP v1 answer means, from its status, `error.status`, `error.message` and the
/// `errorCode` of its `google.firebase.fcm.v1.FcmError` detail (Firebase's "FCM error codes").
///
/// - The device's token is dead: 404 UNREGISTERED; 400 INVALID_ARGUMENT about the registration
///   token (the `errorCode`'s message, or a field violation on `message.token`).
/// - A stale access token: 401 → renew and retry once. But 401 THIRD_PARTY_AUTH_ERROR is the
///   APNs certificate or web push key configured in Firebase: misconfigured.
/// - Our credentials or configuration: 403 PERMISSION_DENIED and any other 403; a 404 that is
///   not UNREGISTERED (no such project): misconfigured — never a device's fault, since a wrong
///   project id must not disable every device.
/// - 403 SENDER_ID_MISMATCH: the token belongs to another Firebase project. It is one device's
///   token, but the same answer for every device would mean our project is the wrong one, and
///   disabling devices cannot be undone: dead (the device stays; an operator can replay).
/// - This request: any other 400 (a bad field, too big), other 4xx, 3xx: dead.
/// - 429 QUOTA_EXCEEDED, 5xx (INTERNAL, UNAVAILABLE): retry, honouring `Retry-After`.
package enum FCMAnswer {
    private static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    private static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"

    package static func judge(
        status: Int, body: [UInt8], headers: [(name: String, value: String)]
    ) -> AnswerOutcome {
        if (200..<300).contains(status) { return .settled(.delivered) }
        let error = ProviderAnswer.object(body)?["error"]
        let details: [JSONValue]
        if case .array(let elements)? = error?["details"] { details = elements } else { details = [] }
        let errorCode = details.first { $0["@type"]?.stringValue == fcmErrorType }?["errorCode"]?.stringValue
        let message = error?["message"]?.stringValue
        let code = (errorCode ?? error?["status"]?.stringValue).map(ProviderAnswer.printable)
        let text = "FCM: " + (code ?? "HTTP \(status)") + (message.map { " (\(ProviderAnswer.printable($0)))" } ?? "")
        switch status {
        case 400:
            return .settled(
                namesTheToken(message: message, details: details) ? .deviceGone(reason: text) : .dead(reason: text))
        case 401:
            return errorCode == "THIRD_PARTY_AUTH_ERROR"
                ? .settled(.misconfigured(reason: text)) : .renewTokenAndRetry(reason: text)
        case 403:
            return .settled(errorCode == "SENDER_ID_MISMATCH" ? .dead(reason: text) : .misconfigured(reason: text))
        case 404:
            return .settled(errorCode == "UNREGISTERED" ? .deviceGone(reason: text) : .misconfigured(reason: text))
        case 429, 500..<600:
            return .settled(.retry(reason: text, notBeforeMilliseconds: ProviderAnswer.retryAfter(in: headers)))
        default:
            return .settled(.dead(reason: text))
        }
    }

    /// Whether a 400 is about the registration token: FCM says so in its message ("The
    /// registration token is not a valid FCM registration token") or names `message.token` in a
    /// `BadRequest` field violation. Any other invalid argument is ours.
    private static func namesTheToken(message: String?, details: [JSONValue]) -> Bool {
        if let message, message.lowercased().contains("registration token") { return true }
        for detail in details where detail["@type"]?.stringValue == badRequestType {
            guard case .array(let violations)? = detail["fieldViolations"] else { continue }
            if violations.contains(where: { $0["field"]?.stringValue == "message.token" }) { return true }
        }
        return false
    }
}
