package import RelayCore
import RelayPrimitives

/// The request that hands one push to a Web Push service (RFC 8030) at the subscription's
/// endpoint, before encryption: the shell encrypts `plaintext` (RFC 8291, `aes128gcm`) and adds
/// `authorization: vapid t=<jwt>, k=<key>` (RFC 8292) for `audience`.
///
/// The plaintext is the webhook's JSON body, so a service worker reads what a webhook receiver
/// does; it is at most 3993 bytes, what one 4096-byte record holds (4096 − 86 header − 16 tag −
/// 1 padding delimiter).
package struct WebPushRequest: Sendable {
    package static let maxPlaintextBytes = 3993
    /// RFC 8030 §5.4: a `Topic` is at most 32 characters of the URL-safe base64 alphabet.
    package static let maxTopicLength = 32

    /// Lower-case names (valid in HTTP/1.1 and HTTP/2): `ttl`, `urgency`, `topic` (when there is
    /// a collapse key), `content-encoding`, `content-type`.
    package var headers: [(name: String, value: String)]
    package var plaintext: [UInt8]
    /// The VAPID JWT's `aud`: the endpoint's origin.
    package var audience: String

    /// - Parameters:
    ///   - now: milliseconds since the epoch, for the `ttl` left.
    ///   - hash: SHA-256, for a collapse key that cannot be a `Topic` as it is.
    package init(notice: PushNotice, endpoint: PushURL, now: Int64, hash: ([UInt8]) -> [UInt8]) {
        let left = notice.expiresAt.subtractingReportingOverflow(now)
        let ttl = left.overflow ? (notice.expiresAt > now ? Int64.max / 1000 : 0) : max(left.partialValue, 0) / 1000
        headers = [("ttl", String(ttl)), ("urgency", notice.priority == .high ? "high" : "normal")]
        if let key = notice.collapseKey, let topic = Self.topic(for: key, hash: hash) {
            headers.append(("topic", topic))
        }
        headers += [("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream")]
        plaintext = Self.plaintext(notice)
        audience = Self.audience(of: endpoint)
    }

    /// The endpoint's origin (RFC 6454).
    package static func audience(of endpoint: PushURL) -> String { endpoint.origin }

    /// The collapse key itself when it is a valid `Topic`; otherwise the URL-safe base64 of the
    /// first 24 bytes of its SHA-256 (32 characters): the same key always makes the same topic,
    /// so the push service still replaces an undelivered push with the next one. Nil when there
    /// is nothing to send (an empty key, a hash that gave nothing).
    package static func topic(for collapseKey: String, hash: ([UInt8]) -> [UInt8]) -> String? {
        PushNotice.fitted(collapseKey: collapseKey, maxBytes: maxTopicLength, allowed: isBase64URLByte, hash: hash)
    }

    private static func isBase64URLByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    // MARK: Plaintext

    /// From the most complete payload to the least (`PayloadFit`).
    private enum Level: CaseIterable {
        /// The `push` object with all its members (title and body shortened if need be).
        case whole
        /// `push` with its title and body only (`{}` when it had neither): its data and unknown
        /// members go before any text is cut.
        case textOnly
        /// The content-free body: ids and counts.
        case contentFree
    }

    static func plaintext(_ notice: PushNotice) -> [UInt8] {
        let showsText = notice.kind.announcesMessage && !notice.contentFree
        let members: [(String, JSONValue)]?
        if showsText, let push = notice.push, case .object(let parsed)? = try? JSONParser.parse(push) {
            members = parsed
        } else {
            members = nil
        }
        return PayloadFit.fit(
            levels: Level.allCases, smallest: .contentFree, title: showsText ? notice.title : nil,
            body: showsText ? notice.body : nil, limit: maxPlaintextBytes
        ) { level, title, body in
            var trimmed = notice
            switch level {
            case .whole:
                // Untouched texts: the chat server's bytes as they are.
                guard title != notice.title || body != notice.body, let members else { break }
                trimmed.push = replacingTexts(of: members, title: title, body: body)
            case .textOnly:
                var texts: [(String, JSONValue)] = []
                if let title { texts.append(("title", .string(title))) }
                if let body { texts.append(("body", .string(body))) }
                trimmed.push = JSONValue.object(texts).serialized
            case .contentFree:
                trimmed.contentFree = true
            }
            return trimmed.webhookBody
        }
    }

    /// The `push` object with its title and body replaced (removed when nil), other members kept.
    private static func replacingTexts(of members: [(String, JSONValue)], title: String?, body: String?) -> [UInt8] {
        let replaced = members.compactMap { name, value -> (String, JSONValue)? in
            switch name {
            case "title": return title.map { (name, .string($0)) }
            case "body": return body.map { (name, .string($0)) }
            default: return (name, value)
            }
        }
        return JSONValue.object(replaced).serialized
    }
}
