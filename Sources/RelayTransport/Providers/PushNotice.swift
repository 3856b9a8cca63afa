package import RelayCore
import RelayPrimitives

/// One push, as every transport sees it: the webhook, APNs, FCM and Web Push each build their
/// request from this value alone, so what a device is told does not depend on how it is reached.
///
/// The message's `push` object (`{"title"?, "body"?, "data"?}`, unknown members kept) is read once
/// here; `push` keeps its exact bytes for the transports that relay it whole (webhook, Web Push).
package struct PushNotice: Sendable, Equatable {
    package var kind: PushKind
    package var userId: String
    package var deviceId: String
    /// The newest message covered (none for a `clear`).
    package var messageId: String?
    package var seqFrom: Int64
    package var seqTo: Int64
    /// The badge: the relay's unread count, or a homeserver's.
    package var unread: Int64
    package var priority: Priority
    package var collapseKey: String?
    /// `push.title`, when it is a string.
    package var title: String?
    /// `push.body`, when it is a string.
    package var body: String?
    /// `push.data` serialized, when it is an object.
    package var data: [UInt8]?
    /// The whole `push` object as the chat server wrote it, when it is one.
    package var push: [UInt8]?
    /// The device asked for ids and counts only: no text, no data leaves the relay for it.
    package var contentFree: Bool
    /// Milliseconds since the epoch: the provider may drop the push after this.
    package var expiresAt: Int64
    /// Stable across retries of the same batch (the webhook id): a provider's idempotency key.
    package var id: String

    package init(
        kind: PushKind, userId: String, deviceId: String, messageId: String? = nil, seqFrom: Int64, seqTo: Int64,
        unread: Int64, priority: Priority = .normal, collapseKey: String? = nil, title: String? = nil,
        body: String? = nil, data: [UInt8]? = nil, push: [UInt8]? = nil, contentFree: Bool = false,
        expiresAt: Int64, id: String
    ) {
        self.kind = kind
        self.userId = userId
        self.deviceId = deviceId
        self.messageId = messageId
        self.seqFrom = seqFrom
        self.seqTo = seqTo
        self.unread = unread
        self.priority = priority
        self.collapseKey = collapseKey
        self.title = title
        self.body = body
        self.data = data
        self.push = push
        self.contentFree = contentFree
        self.expiresAt = expiresAt
        self.id = id
    }

    /// The notice of a due batch. A `push` that is absent, not JSON or not an object leaves
    /// title, body and data nil: a push still goes out (the store accepted the message; a bad
    /// `push` must not stop its notification).
    package init(batch: PushBatch) {
        self.init(
            kind: batch.kind, userId: batch.userId, deviceId: batch.deviceId, messageId: batch.messageId,
            seqFrom: batch.seqFrom, seqTo: batch.seqTo, unread: batch.unread, priority: batch.priority,
            collapseKey: batch.collapseKey, contentFree: batch.contentFree,
            expiresAt: batch.expiresAt.milliseconds, id: batch.webhookId)
        if kind == .call { priority = .high }  // it rings
        push = batch.push
        guard let raw = batch.push, let parsed = try? JSONParser.parse(raw), case .object = parsed else { return }
        title = parsed["title"]?.stringValue
        body = parsed["body"]?.stringValue
        if let data = parsed["data"], case .object = data { self.data = data.serialized }
    }
}

extension PushNotice {
    /// The collapse key as a service that takes at most `maxBytes` of `allowed` bytes carries it —
    /// one rule for every transport: the key itself when it fits; otherwise the URL-safe base64
    /// of the first 24 bytes of its SHA-256 (32 characters), so that the same key still makes the
    /// same value and the service still replaces an undelivered push with the next. Never
    /// dropped: nil only when there is no key (or the hash gave nothing that fits).
    package static func fitted(
        collapseKey key: String?, maxBytes: Int, allowed: (UInt8) -> Bool = { _ in true },
        hash: ([UInt8]) -> [UInt8]
    ) -> String? {
        guard let key, !key.isEmpty else { return nil }
        if key.utf8.count <= maxBytes, key.utf8.allSatisfy(allowed) { return key }
        let hashed = Base64.encode(hash(Array(key.utf8)).prefix(24), .url)
        return hashed.isEmpty || hashed.utf8.count > maxBytes ? nil : hashed
    }
}
