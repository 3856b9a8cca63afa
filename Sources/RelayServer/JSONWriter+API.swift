import RelayCore
import RelayStore

/// How the API's objects are written; one place per object shape.
extension JSONWriter {
    mutating func device(_ device: Device) {
        beginObject()
        member("deviceId", device.deviceId)
        if let transport = device.transport {
            member("transport", transport.kind.rawValue)
            transport.write(to: &self)
        } else {
            member("pushUrl", device.target)
        }
        member("platform", orNull: device.platform)
        member("contentFree", device.contentFree)
        member("state", device.active ? "active" : "disabled")
        member("disabledReason", orNull: device.disabledReason)
        member("createdAt", device.createdAt)
        member("updatedAt", device.updatedAt)
        key("matrix")
        if let matrix = device.matrix {
            beginObject()
            member("appId", matrix.appId)
            member("pushkey", matrix.pushkey)
            endObject()
        } else {
            null()
        }
        endObject()
    }

    /// `{userId, online, lastOnline, devices:[{deviceId, online, lastOnline}]}`; an online
    /// device was last online now.
    mutating func presence(
        userId: String, devices: [(deviceId: String, online: Bool, lastOnline: Timestamp?)], now: Timestamp
    ) {
        beginObject()
        member("userId", userId)
        let online = devices.contains { $0.online }
        member("online", online)
        member("lastOnline", online ? now : devices.compactMap(\.lastOnline).max())
        key("devices")
        beginArray()
        for device in devices {
            beginObject()
            member("deviceId", device.deviceId)
            member("online", device.online)
            member("lastOnline", device.online ? now : device.lastOnline)
            endObject()
        }
        endArray()
        endObject()
    }

    /// Where an inbox stands, as a catch-up page and a WebSocket's `welcome` both say it (members
    /// of an open object): its epoch, head, whether the range asked for is whole, and the first
    /// seq still kept.
    mutating func inboxHead(_ page: CatchUpPage) {
        member("epoch", page.head.epoch)
        member("headSeq", page.head.headSeq)
        member("complete", page.window.complete)
        member("firstAvailableSeq", page.head.prunedSeq + 1)
    }

    /// A message as clients read it (catch-up pages and WebSocket frames); `type` is set on frames.
    mutating func inboxMessage(_ message: InboxMessage, type: String? = nil) {
        beginObject()
        if let type { member("type", type) }
        member("seq", message.seq)
        member("id", message.id)
        member("conversationId", orNull: message.conversationId)
        member("senderId", orNull: message.senderId)
        key("payload")
        raw(message.payload)
        member("createdAt", message.createdAt)
        endObject()
    }

    mutating func recipients(_ recipients: [RecipientSeq]) {
        key("recipients")
        beginArray()
        for recipient in recipients {
            beginObject()
            member("userId", recipient.userId)
            member("seq", recipient.seq)
            member("delivery", recipient.delivery.rawValue)
            endObject()
        }
        endArray()
    }
}
