package import RelayCore

/// The request that hands one push to FCM's HTTP v1 API
/// (`POST https://fcm.googleapis.com/v1/projects/<id>/messages:send`), without its
/// `authorization: Bearer <access token>` header, which the shell adds.
///
/// A message with text is a notification (title, body, the badge count on Android) plus data; a
/// content-free device, a message without text and a `clear` get data only, which the app
/// handles itself (a content-free app fetches the message, a clear withdraws what was read); so
/// does a call, at high priority, with its title and body in the data (the app rings itself).
/// `data` values are all strings, as FCM requires: `userId`, `deviceId`, `type`, `seqFrom`,
/// `seqTo`, `unread`, `messageId` when known, and the chat server's `push.data` as JSON text
/// under `data` (one member: its keys could collide with FCM's reserved ones, e.g. `from`).
package struct FCMRequest: Sendable {
    /// FCM's limit on a message's payload: notification and data, keys and values. The envelope
    /// (token, Android options) is not counted.
    package static let maxPayloadBytes = 4096
    /// FCM keeps a message at most 4 weeks and refuses a longer `ttl`.
    package static let maxTTLSeconds: Int64 = 2_419_200

    package enum Refusal: Error, Sendable, Equatable {
        /// Not a Firebase project id (letters, digits, `-`, `.`, `:`; at most 100).
        case badProjectId
        /// Empty: no push can reach that device.
        case badRegistrationToken

        package var outcome: DeliveryOutcome {
            switch self {
            case .badProjectId: return .misconfigured(reason: "FCM: the configured project id is malformed")
            case .badRegistrationToken: return .deviceGone(reason: "FCM: the registration token is empty")
            }
        }
    }

    /// `/v1/projects/<id>/messages:send`.
    package var path: String
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    /// - Parameter now: milliseconds since the epoch, for the `ttl` left.
    package init(notice: PushNotice, registrationToken: String, projectId: String, now: Int64) throws(Refusal) {
        guard (1...100).contains(projectId.utf8.count), projectId.utf8.allSatisfy(Self.isProjectIdByte) else {
            throw .badProjectId
        }
        guard !registrationToken.isEmpty else { throw .badRegistrationToken }
        path = "/v1/projects/\(projectId)/messages:send"
        headers = [("content-type", "application/json; charset=utf-8")]
        let left = notice.expiresAt.subtractingReportingOverflow(now)
        let ttl = left.overflow ? (notice.expiresAt > now ? Self.maxTTLSeconds : 0) : left.partialValue / 1000
        body = Self.body(
            notice, token: registrationToken, ttlSeconds: min(max(ttl, 0), Self.maxTTLSeconds))
    }

    private static func isProjectIdByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }

    // MARK: Body

    /// From the most complete payload to the least (`PayloadFit`).
    private enum Level: CaseIterable {
        case whole
        /// Without the chat server's `push.data`.
        case withoutData
        /// `data` without `deviceId` and `messageId`.
        case essentialData
        /// `data` with `type`, the seqs and `unread` only; without texts (the last resort), no
        /// notification either: the smallest message.
        case bareData
    }

    /// The measured part (notification and data) and the whole body.
    private struct Candidate {
        var payloadBytes: Int
        var body: [UInt8]
    }

    private static func body(_ notice: PushNotice, token: String, ttlSeconds: Int64) -> [UInt8] {
        let showsText = notice.kind == .message && !notice.contentFree
        let title = showsText ? notice.title.nonEmpty : nil
        let body = showsText ? notice.body.nonEmpty : nil
        let chosen = PayloadFit.fit(
            levels: Level.allCases, smallest: .bareData, title: title, body: body, limit: maxPayloadBytes,
            size: \.payloadBytes
        ) { level, title, body in
            candidate(notice, level: level, title: title, body: body, token: token, ttlSeconds: ttlSeconds)
        }
        return chosen.body
    }

    private static func candidate(
        _ notice: PushNotice, level: Level, title: String?, body: String?, token: String, ttlSeconds: Int64
    ) -> Candidate {
        let notifies = title != nil || body != nil
        var notification = JSONWriter(capacity: 256)
        if notifies {
            notification.beginObject()
            if let title { notification.member("title", title) }
            if let body { notification.member("body", body) }
            notification.endObject()
        }
        var data = JSONWriter(capacity: 256)
        data.beginObject()
        let fullData = level == .whole || level == .withoutData
        if level != .bareData { data.member("userId", notice.userId) }
        if fullData { data.member("deviceId", notice.deviceId) }
        data.member("type", notice.kind.rawValue)
        data.member("seqFrom", String(notice.seqFrom))
        data.member("seqTo", String(notice.seqTo))
        data.member("unread", String(notice.unread))
        if fullData, !notice.contentFree, let messageId = notice.messageId {
            data.member("messageId", messageId)
        }
        if level == .whole, notice.kind.announcesMessage, !notice.contentFree, let appData = notice.data {
            data.member("data", String(decoding: appData, as: UTF8.self))
        }
        // A call is data only (the app rings itself): its texts travel in the data.
        if notice.kind == .call, level == .whole, !notice.contentFree {
            if let title = notice.title { data.member("title", title) }
            if let body = notice.body { data.member("body", body) }
        }
        data.endObject()

        var writer = JSONWriter(capacity: 512 + notification.bytes.count + data.bytes.count)
        writer.beginObject()
        writer.key("message")
        writer.beginObject()
        writer.member("token", token)
        if notifies {
            writer.key("notification")
            writer.raw(notification.bytes)
        }
        writer.key("data")
        writer.raw(data.bytes)
        writer.key("android")
        writer.beginObject()
        writer.member("priority", notice.priority == .high ? "HIGH" : "NORMAL")
        writer.member("ttl", "\(ttlSeconds)s")
        if let key = notice.collapseKey, !key.isEmpty { writer.member("collapse_key", key) }
        if notifies {
            writer.key("notification")
            writer.beginObject()
            // An int32 for FCM: a larger count would make the whole message invalid.
            writer.member("notification_count", min(max(notice.unread, 0), Int64(Int32.max)))
            writer.endObject()
        }
        writer.endObject()
        writer.endObject()
        writer.endObject()
        return Candidate(payloadBytes: notification.bytes.count + data.bytes.count, body: writer.bytes)
    }
}
