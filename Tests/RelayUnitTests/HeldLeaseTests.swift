import RelayCore
import Testing

@Suite struct HeldLeaseTests {
    /// The grant is not proof of life (it may answer a lock asked for hours ago): the first
    /// touch's answer is, and it makes the node the holder once.
    @Test func heldFromTheFirstAnsweredTouch() {
        var lease = HeldLease(leaseMilliseconds: 3000)
        #expect(!lease.holds(at: 0))
        #expect(lease.nextTouch == nil)
        lease.sent(at: 100)
        #expect(!lease.holds(at: 100))
        #expect(lease.nextTouch == nil)  // awaiting its answer
        let gained = lease.answered(now: 105)
        #expect(gained)
        #expect(lease.holds(at: 105))
        #expect(lease.nextTouch == 1100)
        lease.sent(at: 1100)
        let again = lease.answered(now: 1102)
        #expect(!again)  // held already: nothing to announce
    }

    /// Counted from when the answered touch was *sent*: the server's idle timer started later,
    /// so the node stops delivering no later than the server gives the lease away.
    @Test func endsALeaseAfterTheLastAnsweredTouchWasSent() {
        var lease = HeldLease(leaseMilliseconds: 3000)
        lease.sent(at: 0)
        _ = lease.answered(now: 50)
        #expect(lease.holds(at: 2999))
        #expect(!lease.holds(at: 3000))
        // Stopped for 10 s: the touch sent on resuming is not an answer.
        lease.sent(at: 10_000)
        #expect(!lease.holds(at: 10_001))
        // Had the server kept the session, the answer makes it the holder again: look at once.
        let regained = lease.answered(now: 10_002)
        #expect(regained)
        #expect(lease.holds(at: 12_999))
    }

    @Test func aLostSessionHoldsNothing() {
        var lease = HeldLease(leaseMilliseconds: 3000)
        lease.sent(at: 0)
        _ = lease.answered(now: 1)
        lease.lost()
        #expect(!lease.holds(at: 2))
        #expect(lease.nextTouch == nil)
        let late = lease.answered(now: 3)
        #expect(!late)  // a late answer of the old session proves nothing
        #expect(!lease.holds(at: 3))
    }
}
