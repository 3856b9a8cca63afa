import Glibc
import RelayLocks
import Testing

/// The timer behind every periodic job: it fires only when armed, the earliest arm wins, and a
/// stopped timer never fires again. Wall-clock bounds are generous (a busy CI machine, the
/// sanitizers): a wait for a firing is far shorter than the arm it must not be confused with.
struct DemandTimerTests {
    @Test func firesOnceWhenArmedAndNeverUnarmed() {
        let timer = DemandTimer()
        let fired = LockedValue(0)
        timer.start {
            fired.withLock { $0 += 1 }
            fired.broadcast()
        }
        defer { timer.stop() }
        usleep(100_000)
        #expect(fired.withLock { $0 } == 0)  // never armed: never fires
        timer.arm(afterMilliseconds: 20)
        timer.arm(afterMilliseconds: 60_000)  // later than the armed one: ignored
        let count = fired.withLock(when: { $0 >= 1 }, waitingAtMost: 30_000) { $0 }
        #expect(count == 1)
        usleep(200_000)
        #expect(fired.withLock { $0 } == 1)  // one arm, one firing
    }

    @Test func anEarlierArmCutsTheWaitShort() {
        let timer = DemandTimer()
        let fired = LockedValue(false)
        timer.start {
            fired.withLock { $0 = true }
            fired.broadcast()
        }
        defer { timer.stop() }
        timer.arm(afterMilliseconds: 60_000)
        usleep(50_000)  // the thread now sleeps toward the minute
        timer.arm(afterMilliseconds: 10)
        #expect(fired.withLock(when: { $0 }, waitingAtMost: 30_000) { $0 })
    }

    @Test func aStoppedTimerDropsItsArm() {
        let timer = DemandTimer()
        let fired = LockedValue(false)
        timer.start { fired.withLock { $0 = true } }
        // A second between the arm and the stop: a test thread descheduled between the two calls
        // would otherwise see the timer fire before it was stopped.
        timer.arm(afterMilliseconds: 1_000)
        timer.stop()
        usleep(1_500_000)
        #expect(!fired.withLock { $0 })
        timer.arm(afterMilliseconds: 0)  // after stop: harmless
        // A timer that was never started stops too.
        DemandTimer().stop()
    }
}
