import RelayLive
import RelayLocks
import RelayServer
import RelayStore
import Testing

struct CommitSignalTests {
    /// Every commit fires the signal: a million of them must cost a million calls. The listener
    /// used to be kept as a bare closure in a generic lock, re-wrapped in thunks at each read:
    /// quadratic time, then a stack overflow after some 100,000 commits.
    @Test func firingStaysConstantTimeAcrossAMillionCommits() {
        let signal = CommitSignal()
        let calls = LockedValue(0)
        signal.listen(from: .data) { calls.withLock { $0 += 1 } }
        for _ in 0..<1_000_000 { signal.fire(.data) }
        #expect(calls.withLock { $0 } == 1_000_000)
    }

    /// A listener hears commits of its effect and above only.
    @Test func listenersHearTheirEffectAndAbove() {
        let signal = CommitSignal()
        let heard = LockedValue<[String]>([])
        signal.listen(from: .data) { heard.withLock { $0.append("retention") } }
        signal.listen(from: .jobs) { heard.withLock { $0.append("notifier") } }
        signal.fire(.maintenance)
        #expect(heard.withLock { $0 } == [])
        signal.fire(.data)
        #expect(heard.withLock { $0 } == ["retention"])
        signal.fire(.jobs)
        #expect(heard.withLock { $0 } == ["retention", "retention", "notifier"])
    }
}
