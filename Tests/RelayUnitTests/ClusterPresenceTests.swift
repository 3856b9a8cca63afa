import RelayCore
import Testing

@Suite struct ClusterPresenceTests {
    func at(_ milliseconds: Int64) -> Timestamp { Timestamp(milliseconds: milliseconds) }

    @Test func aDeviceIsOnlineWhileAnyNodeHoldsIt() {
        var presence = ClusterPresence(leaseMilliseconds: 1000)
        presence.set(node: "a", userId: "u", deviceId: "phone", online: true, now: at(0))
        presence.set(node: "b", userId: "u", deviceId: "phone", online: true, now: at(0))
        presence.set(node: "a", userId: "u", deviceId: "phone", online: false, now: at(10))
        #expect(presence.devices(of: "u") == ["phone"])
        presence.set(node: "b", userId: "u", deviceId: "phone", online: false, now: at(20))
        #expect(presence.devices(of: "u").isEmpty)
        #expect(presence.users.isEmpty)
    }

    @Test func aNodesDevicesEndWithItsLeaseUnlessRenewed() {
        var presence = ClusterPresence(leaseMilliseconds: 1000)
        presence.set(node: "a", userId: "u", deviceId: "phone", online: true, now: at(0))
        presence.set(node: "b", userId: "v", deviceId: "tablet", online: true, now: at(0))
        #expect(presence.nextExpiry == at(1000))  // heard of, no lease yet: one lease's time
        presence.renew(node: "b", until: at(5000))
        #expect(presence.expire(now: at(999)).nodes.isEmpty)
        let ended = presence.expire(now: at(1000))
        #expect(ended.nodes == ["a"])
        #expect(ended.users == ["u"])
        #expect(presence.devices(of: "u").isEmpty)
        #expect(presence.devices(of: "v") == ["tablet"])
        #expect(presence.nextExpiry == at(5000))
    }

    @Test func aFreshReadReplacesEverythingAndNamesWhoseStateMayHaveChanged() {
        var presence = ClusterPresence(leaseMilliseconds: 1000)
        presence.set(node: "a", userId: "u", deviceId: "phone", online: true, now: at(0))
        let users = presence.replace(with: [(node: "b", userId: "v", deviceId: "tablet", leaseUntil: at(3000))])
        #expect(users == ["u", "v"])
        #expect(presence.devices(of: "u").isEmpty)
        #expect(presence.nextExpiry == at(3000))
    }
}
