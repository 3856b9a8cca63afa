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
            if transport.kind != .webhook { member("app", transport.app.name) }
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
