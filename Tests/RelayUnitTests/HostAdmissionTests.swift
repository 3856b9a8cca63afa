import RelayCore
import Testing

/// Which due devices a scheduler pass reads: no more per host than it has slots free, looking
/// past a bounded number of devices of full hosts for other hosts' work.
@Suite struct HostAdmissionTests {
    static func admission(slots: Int) -> HostAdmission {
        HostAdmission(slotsPerHost: slots) { transport in
            if case .webhook(let url) = transport { url.host } else { "other" }
        }
    }

    static func due(_ user: String, host: String) -> DueDevice {
        DueDevice(userId: user, deviceId: "phone", target: "http://\(host)/\(user)")
    }

    /// What a store scan keeps of `candidates` (in due order): those taken, at most `limit`,
    /// until the admission says stop.
    static func chosen(_ candidates: [DueDevice], by admission: inout HostAdmission, limit: Int) -> [String] {
        var taken: [String] = []
        for candidate in candidates where taken.count < limit {
            switch admission.consider(candidate) {
            case .take: taken.append(candidate.userId)
            case .skip: continue
            case .stop: return taken
            }
        }
        return taken
    }

    @Test func eachHostGetsItsFreeSlotsAndNoMore() {
        var admission = Self.admission(slots: 2)
        admission.begin(inFlight: [PushRoute(.webhook, host: "a.example"): 1])
        let candidates = [
            Self.due("u1", host: "a.example"), Self.due("u2", host: "a.example"), Self.due("u3", host: "b.example"),
            Self.due("u4", host: "b.example"), Self.due("u5", host: "b.example"),
        ]
        // a has one slot left (one delivery in flight), b two: u2 and u5 wait for a later pass.
        #expect(Self.chosen(candidates, by: &admission, limit: 10) == ["u1", "u3", "u4"])
        // A new pass starts from what is in flight then.
        admission.begin(inFlight: [:])
        #expect(Self.chosen(candidates, by: &admission, limit: 2) == ["u1", "u2"])
    }

    @Test func aFullHostIsLookedPastOnlySoFar() {
        var admission = Self.admission(slots: 1)
        admission.begin(inFlight: [PushRoute(.webhook, host: "busy.example"): 1])
        let busy = (0..<HostAdmission.lookPastFull).map { Self.due("b\($0)", host: "busy.example") }
        let later = Self.due("late", host: "idle.example")
        #expect(Self.chosen(busy + [later], by: &admission, limit: 10).isEmpty)
        admission.begin(inFlight: [PushRoute(.webhook, host: "busy.example"): 1])
        #expect(Self.chosen(Array(busy.dropLast()) + [later], by: &admission, limit: 10) == ["late"])
    }

    /// Each host has its own number of slots (a push service's host more than a webhook's).
    @Test func eachHostHasItsOwnSlots() {
        var admission = HostAdmission { transport in
            if case .webhook(let url) = transport {
                (PushRoute(.webhook, host: url.host), url.host == "service.example" ? 3 : 1)
            } else {
                (PushRoute(.apns, host: "x"), 1)
            }
        }
        admission.begin(inFlight: [PushRoute(.webhook, host: "service.example"): 1])
        let candidates =
            (1...4).map { Self.due("s\($0)", host: "service.example") } + [
                Self.due("w1", host: "hook.example"), Self.due("w2", host: "hook.example"),
            ]
        #expect(Self.chosen(candidates, by: &admission, limit: 10) == ["s1", "s2", "w1"])
    }

    /// A batch goes to the transport its device has when the batch is read: the one the pass
    /// parsed, or the new one if the device changed it in between.
    @Test func aBatchIsPlacedByItsDevicesTransportNow() {
        var admission = Self.admission(slots: 2)
        admission.begin(inFlight: [:])
        let device = Self.due("u1", host: "a.example")
        #expect(admission.consider(device) == .take)
        func batch(_ target: String) -> PushBatch {
            PushBatch(
                userId: "u1", deviceId: "phone", target: target, contentFree: false, jobIds: [1], webhookId: "w",
                kind: .message, seqFrom: 1, seqTo: 1, messageId: "m", unread: 1, priority: .normal, collapseKey: nil,
                push: nil, attempts: 0, expiresAt: Timestamp(milliseconds: 1))
        }
        #expect(admission.placed(batch(device.target))?.route.host == "a.example")
        #expect(admission.placed(batch("http://b.example/u1"))?.route.host == "b.example")
        #expect(admission.placed(batch("not a transport")) == nil)
    }

    @Test func aMalformedTransportIsChosenToBeDeadLettered() {
        var admission = Self.admission(slots: 1)
        admission.begin(inFlight: [:])
        let broken = DueDevice(userId: "x", deviceId: "phone", target: "not a transport")
        #expect(admission.consider(broken) == .take)
    }
}
