import RelayCore
import RelayStore

/// How the API's objects are written; one place per object shape.
extension JSONWriter {
    mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    mutating func member(_ name: String, orNull value: String?) {
        key(name)
        string(orNull: value)
    }

    mutating func member(_ name: String, _ value: Int64) {
        key(name)
        int(value)
    }

    mutating func member(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    mutating func member(_ name: String, _ value: Timestamp?) {
        key(name)
        string(orNull: value?.rfc3339)
    }

    mutating func device(_ device: Device) {
        beginObject()
        member("deviceId", device.deviceId)
        member("pushUrl", device.pushURL)
        member("platform", orNull: device.platform)
        member("contentFree", device.contentFree)
        member("state", device.active ? "active" : "disabled")
        member("disabledReason", orNull: device.disabledReason)
        member("createdAt", device.createdAt)
        member("updatedAt", device.updatedAt)
        endObject()
    }

    /// `{userId, online, lastOnline, devices:[{deviceId, online, lastOnline}]}`.
    mutating func presence(userId: String, lastOnline: Timestamp?, devices: [Device]) {
        beginObject()
        member("userId", userId)
        member("online", false)
        let latest = ([lastOnline] + devices.map(\.lastOnline)).compactMap { $0 }.max()
        member("lastOnline", latest)
        key("devices")
        beginArray()
        for device in devices {
            beginObject()
            member("deviceId", device.deviceId)
            member("online", false)
            member("lastOnline", device.lastOnline)
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
