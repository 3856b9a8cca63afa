import RelayLocks
import RelayServer
import Testing

struct CommitSignalTests {
    /// Every commit fires the signal: a million of them must cost a million calls. The listener
    /// used to be kept as a bare closure in a generic lock, re-wrapped in thunks at each read:
    /// quadratic time, then a stack overflow after some 100,000 commits.
    @Test func firingStaysConstantTimeAcrossAMillionCommits() {
        let signal = CommitSignal()
        let calls = LockedValue(0)
        signal.listen { calls.withLock { $0 += 1 } }
        for _ in 0..<1_000_000 { signal.fire() }
        #expect(calls.withLock { $0 } == 1_000_000)
    }
}
