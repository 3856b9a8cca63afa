/// A device with due push jobs, as the store lists them for a scheduler pass: who, the stored
/// transport the scheduler judges its host by before the device's batch is read, and what the
/// batch needs of the device besides its jobs.
package struct DueDevice: Sendable, Equatable {
    package var userId: String
    package var deviceId: String
    /// The device's stored push transport (`PushTransport(target:)`).
    package var target: String
    package var contentFree: Bool

    package init(userId: String, deviceId: String, target: String, contentFree: Bool = false) {
        self.userId = userId
        self.deviceId = deviceId
        self.target = target
        self.contentFree = contentFree
    }

    /// The key of the device's batch (`PushBatch.deviceKey`).
    package var key: String { PushBatch.deviceKey(userId, deviceId) }
}
