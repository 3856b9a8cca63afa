import RelayCore
import Testing

/// The presence tracker on its own: sockets, other nodes and time go in; transitions, reports
/// and answers come out.
@Suite struct PresenceTrackerTests {
    func at(_ milliseconds: Int64) -> Timestamp { Timestamp(milliseconds: milliseconds) }

    @Test func aDeviceIsOnlineWhileOneForegroundSocketIsOpen() {
        var presence = PresenceTracker(delayMs: 0, leaseMs: 3000)
        #expect(presence.opened(1, userId: "u", deviceId: "phone", background: true, at: at(0)).deviceOnline == nil)
        #expect(presence.onlineDevices("u").isEmpty)
        #expect(presence.devices(of: "u") == ["phone"])
        #expect(presence.opened(2, userId: "u", deviceId: "phone", background: false, at: at(1)).deviceOnline == true)
        #expect(presence.setBackground(2, userId: "u", deviceId: "phone", true, at: at(2)).deviceOnline == false)
        #expect(presence.setBackground(1, userId: "u", deviceId: "phone", false, at: at(3)).deviceOnline == true)
        #expect(presence.closed(2, userId: "u", deviceId: "phone", at: at(4)) == .none)
        #expect(presence.onlineUsers == ["u"])
        #expect(presence.closed(1, userId: "u", deviceId: "phone", at: at(5)).deviceOnline == false)
        #expect(presence.devices(of: "u").isEmpty)
        #expect(presence.sockets(of: "u").isEmpty)
        // A socket it never heard of changes nothing.
        #expect(presence.setBackground(9, userId: "u", deviceId: "phone", false, at: at(6)) == .none)
    }

    @Test func anOfflineTimeStaysUnrecordedUntilTheStoreHasThatVeryTime() {
        var presence = PresenceTracker(delayMs: 0, leaseMs: 3000)
        _ = presence.opened(1, userId: "u", deviceId: "phone", background: false, at: at(0))
        _ = presence.closed(1, userId: "u", deviceId: "phone", at: at(10))
        _ = presence.opened(2, userId: "u", deviceId: "phone", background: false, at: at(20))
        _ = presence.closed(2, userId: "u", deviceId: "phone", at: at(30))
        presence.recorded(userId: "u", deviceId: "phone", at: at(10))  // the older write completes
        #expect(presence.unrecorded("u") == ["phone": at(30)])
        presence.recorded(userId: "u", deviceId: "phone", at: at(30))
        #expect(presence.unrecorded("u").isEmpty)
    }

    @Test func changesAreReportedAfterTheDelayAndNotAtAllWhenTheyFlipBack() {
        var presence = PresenceTracker(delayMs: 1000, leaseMs: 3000)
        _ = presence.opened(1, userId: "u", deviceId: "phone", background: false, at: at(0))
        _ = presence.opened(2, userId: "v", deviceId: "phone", background: false, at: at(0))
        _ = presence.closed(2, userId: "v", deviceId: "phone", at: at(500))  // back within the delay
        #expect(presence.due(at: at(999)).changes.isEmpty)
        #expect(presence.due(at: at(1000)).changes == [.init(userId: "u", online: true, at: at(0))])
        #expect(!presence.hasPendingReports)
    }

    @Test func theLeaseGoesOutWithTheFirstOnlineDeviceAndIsRenewedWithAThirdLeft() {
        var presence = PresenceTracker(delayMs: 0, leaseMs: 3000)
        #expect(presence.opened(1, userId: "u", deviceId: "phone", background: false, at: at(0)).lease == at(3000))
        #expect(presence.due(at: at(1000)).lease == nil)
        #expect(presence.due(at: at(1001)).lease == at(4001))
        _ = presence.closed(1, userId: "u", deviceId: "phone", at: at(2000))
        #expect(presence.due(at: at(4000)).lease == nil)  // no online device: no lease to hold
    }

    @Test func aUserIsOnlineWhileAnotherNodeHoldsADeviceUntilThatNodesLeaseEnds() {
        var presence = PresenceTracker(delayMs: 0, leaseMs: 1000)
        presence.elsewhere(node: "b", userId: "u", deviceId: "tablet", online: true, at: at(0))
        _ = presence.opened(1, userId: "u", deviceId: "phone", background: false, at: at(0))
        #expect(presence.onlineDevices("u") == ["phone", "tablet"])
        #expect(presence.due(at: at(0)).changes == [.init(userId: "u", online: true, at: at(0))])
        _ = presence.closed(1, userId: "u", deviceId: "phone", at: at(10))
        #expect(presence.onlineUsers == ["u"])  // still online on b
        #expect(presence.nextLeaseExpiry == at(1000))
        #expect(presence.expireLeases(at: at(1000)) == ["b"])
        #expect(presence.onlineUsers.isEmpty)
        #expect(presence.due(at: at(1000)).changes == [.init(userId: "u", online: false, at: at(1000))])
    }

    @Test func signalsGoToForegroundSocketsExceptTheSendersDevice() {
        var presence = PresenceTracker(delayMs: 0, leaseMs: 3000)
        _ = presence.opened(1, userId: "u", deviceId: "phone", background: false, at: at(0))
        _ = presence.opened(2, userId: "u", deviceId: "tablet", background: false, at: at(0))
        _ = presence.opened(3, userId: "u", deviceId: "laptop", background: true, at: at(0))
        #expect(presence.foregroundSockets(of: "u", except: "phone") == [2])
        #expect(Set(presence.foregroundSockets(of: "u")) == [1, 2])
        #expect(Set(presence.sockets(of: "u")) == [1, 2, 3])
        #expect(presence.sockets(of: "u", deviceId: "laptop") == [3])
    }
}
