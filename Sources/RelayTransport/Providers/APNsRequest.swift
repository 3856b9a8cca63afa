package import RelayCore
import RelayCrypto

/// The HTTP/2 request that hands one push to APNs (`POST https://api.push.apple.com/3/device/…`),
/// without its `authorization: bearer <jwt>` header, which the shell adds from the token it holds.
///
/// A message alerts: its title and body, the badge, a sound when it is high priority. A
/// content-free device (or a message with no text) gets a generic alert with `mutable-content`,
/// so that the app's Notification Service Extension can fetch the message and show it. A `clear`
/// only sets the badge (and wakes the app to withdraw what was read); it is sent as an `alert`
/// push at priority 5, because Apple's rules for `background` pushes forbid the `badge` key.
/// Every payload carries `relay` (whom it is for, which seqs) and stays within 4096 bytes.
///
/// A call to a device with a PushKit token is a `voip` push (Apple requires the push type to
/// match): topic `<bundle id>.voip`, priority 10, no `aps` (PushKit hands the app the whole
/// dictionary, which must report the call to CallKit), the `push` object whole for the caller's
/// name; within 5120 bytes. A call to a device without one is an alert at priority 10.
package struct APNsRequest: Sendable {
    /// APNs refuses larger payloads (413 PayloadTooLarge).
    package static let maxPayloadBytes = 4096
    package static let maxVoIPPayloadBytes = 5120
    /// APNs refuses a longer `apns-collapse-id` (400 BadCollapseId): a longer key is hashed to fit
    /// (`PushNotice.fitted`), as Web Push's `Topic` is.
    package static let maxCollapseIdBytes = 64
    /// The alert of a content-free push (its service extension replaces it).
    package static let genericBody = "New message"

    /// Why no request can be built: not a delivery problem of APNs's making.
    package enum Refusal: Error, Sendable, Equatable {
        /// Not 1–200 hex digits: APNs would refuse it, and it must not reach the `:path` as is.
        case badDeviceToken
        /// Empty or not printable ASCII: a configuration error.
        case badTopic

        /// What the refusal means for the job.
        package var outcome: DeliveryOutcome {
            switch self {
            case .badDeviceToken: return .deviceGone(reason: "APNs: the device token is not hexadecimal")
            case .badTopic: return .misconfigured(reason: "APNs: the configured topic is not a bundle id")
            }
        }
    }

    /// `/3/device/<token>`.
    package var path: String
    /// Lower-case names, in a fixed order: `apns-topic`, `apns-push-type`, `apns-priority`,
    /// `apns-expiration`, `apns-collapse-id` (when the key fits), `apns-id`.
    package var headers: [(name: String, value: String)]
    /// The JSON payload, at most `maxPayloadBytes`.
    package var body: [UInt8]

    /// - Parameters:
    ///   - deviceToken: the device's APNs token, in hex.
    ///   - topic: the app's bundle id.
    ///   - now: milliseconds since the epoch (an expiration already past is sent as now).
    ///   - hash: SHA-256, for a collapse key longer than APNs takes.
    ///   - voip: send it as a PushKit push (a call, to the device's `voipToken`).
    package init(
        notice: PushNotice, deviceToken: String, topic: String, now: Int64, voip: Bool = false,
        hash: ([UInt8]) -> [UInt8] = Crypto.sha256
    ) throws(Refusal) {
        guard (1...200).contains(deviceToken.utf8.count), deviceToken.utf8.allSatisfy(\.isHexDigit) else {
            throw .badDeviceToken
        }
        guard !topic.isEmpty, topic.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else { throw .badTopic }
        path = "/3/device/" + deviceToken
        let urgent = notice.kind.announcesMessage && notice.priority == .high
        headers = [
            ("apns-topic", voip ? topic + ".voip" : topic),
            ("apns-push-type", voip ? "voip" : "alert"),
            ("apns-priority", urgent || voip ? "10" : "5"),
            ("apns-expiration", String(max(notice.expiresAt, now) / 1000)),
        ]
        if !voip,
            let key = PushNotice.fitted(collapseKey: notice.collapseKey, maxBytes: Self.maxCollapseIdBytes, hash: hash)
        {
            headers.append(("apns-collapse-id", key))
        }
        headers.append(("apns-id", Self.uuid(for: notice.id)))
        body = voip ? Self.voipPayload(notice) : Self.payload(notice)
    }

    // MARK: Payload

    /// From the most complete payload to the least (`PayloadFit`).
    private enum Level: CaseIterable {
        case whole
        case withoutData
        /// `relay` without `deviceId` and `messageId`.
        case essentialRelay
        /// `relay` with `type` and `seq` only.
        case bareRelay
        /// The generic alert instead of the texts.
        case generic
    }

    /// `{"relay": {…}, "push": {…}}`: the `push` object left out when the device is content-free
    /// or it does not fit.
    static func voipPayload(_ notice: PushNotice) -> [UInt8] {
        func payload(withPush: Bool) -> [UInt8] {
            var writer = JSONWriter(capacity: 256 + (notice.push?.count ?? 0))
            writer.beginObject()
            relay(notice, level: .whole, to: &writer)
            if withPush, !notice.contentFree, let push = notice.push {
                writer.key("push")
                writer.raw(push)
            }
            writer.endObject()
            return writer.bytes
        }
        let whole = payload(withPush: true)
        return whole.count <= maxVoIPPayloadBytes ? whole : payload(withPush: false)
    }

    static func payload(_ notice: PushNotice) -> [UInt8] {
        let showsText = notice.kind.announcesMessage && !notice.contentFree
        let title = showsText ? notice.title.nonEmpty : nil
        let body = showsText ? notice.body.nonEmpty : nil
        return PayloadFit.fit(
            levels: Level.allCases, smallest: .generic, title: title, body: body, limit: maxPayloadBytes
        ) { level, title, body in
            payload(notice, level: level, title: title, body: body)
        }
    }

    private static func payload(_ notice: PushNotice, level: Level, title: String?, body: String?) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.key("aps")
        writer.beginObject()
        switch notice.kind {
        case .clear:
            writer.member("badge", notice.unread)
            writer.member("content-available", 1)
        case .message, .call:
            writer.key("alert")
            writer.beginObject()
            let generic = level == .generic || (title == nil && body == nil)
            if generic {
                writer.member("body", genericBody)
            } else {
                if let title { writer.member("title", title) }
                if let body { writer.member("body", body) }
            }
            writer.endObject()
            writer.member("badge", notice.unread)
            if notice.priority == .high { writer.member("sound", "default") }
            if generic { writer.member("mutable-content", 1) }
        }
        writer.endObject()
        relay(notice, level: level, to: &writer)
        if level == .whole, notice.kind.announcesMessage, !notice.contentFree, let data = notice.data {
            writer.key("data")
            writer.raw(data)
        }
        writer.endObject()
        return writer.bytes
    }

    /// `"relay": {userId, deviceId, messageId, seq, type}`, as much as `level` keeps.
    private static func relay(_ notice: PushNotice, level: Level, to writer: inout JSONWriter) {
        writer.key("relay")
        writer.beginObject()
        if level == .whole || level == .withoutData || level == .essentialRelay {
            writer.member("userId", notice.userId)
        }
        if level == .whole || level == .withoutData {
            writer.member("deviceId", notice.deviceId)
            if !notice.contentFree, let messageId = notice.messageId { writer.member("messageId", messageId) }
        }
        writer.key("seq")
        writer.beginObject()
        writer.member("from", notice.seqFrom)
        writer.member("to", notice.seqTo)
        writer.endObject()
        writer.member("type", notice.kind.rawValue)
        writer.endObject()
    }

    // MARK: apns-id

    /// A UUID (version 8, RFC 9562) derived from the notice id: a retry of the same batch keeps
    /// its `apns-id`, so it can be traced across attempts. Two FNV-1a hashes, not a cryptographic
    /// one: it names a notification, it protects nothing.
    static func uuid(for id: String) -> String {
        var bytes = fnv1a(id.utf8, basis: 0xCBF2_9CE4_8422_2325).bigEndianBytes
        bytes += fnv1a(id.utf8, basis: 0x6C62_272E_07BB_0142).bigEndianBytes
        bytes[6] = bytes[6] & 0x0F | 0x80
        bytes[8] = bytes[8] & 0x3F | 0x80
        // Written byte by byte: a `String(radix:)` per nibble cost 3 % of an APNs drain's CPU.
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            Hex.append(byte, to: &text)
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func fnv1a(_ bytes: String.UTF8View, basis: UInt64) -> UInt64 {
        var hash = basis
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3  // wraps by definition (FNV works modulo 2^64)
        }
        return hash
    }
}

extension UInt64 {
    fileprivate var bigEndianBytes: [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: self >> (56 - 8 * $0)) } }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
