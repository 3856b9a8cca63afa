/// A device with due push jobs, as the store lists them for a scheduler pass: who, and the
/// stored transport the scheduler judges its host by before the device's batch is read.
package struct DueDevice: Sendable, Equatable {
    package var userId: String
    package var deviceId: String
    /// The device's stored push transport (`PushTransport(target:)`).
    package var target: String

    package init(userId: String, deviceId: String, target: String) {
        self.userId = userId
        self.deviceId = deviceId
        self.target = target
    }

    /// The key of the device's batch (`PushBatch.deviceKey`).
    package var key: String { PushBatch.deviceKey(userId, deviceId) }
}
