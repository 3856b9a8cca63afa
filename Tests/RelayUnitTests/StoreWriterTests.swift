import RelayStore
import Testing

/// How the writer bounds a transaction, what `/readyz` decides from its state, and how a batch's
/// messages come together again: pure, no database.
@Suite struct StoreWriterTests {
    /// Ordinary writes first, up to the row bound; bulk writes (a batch's messages) fill the rest,
    /// and at least one of them goes in whenever any waits.
    @Test func aTransactionTakesOrdinaryWritesFirstThenBulkUpToTheRowBound() {
        let bound = StoreWriter.maxRows
        // A batch of 1,000-recipient messages alone: as many as fit.
        #expect(StoreWriter.take(ordinary: [], bulk: Array(repeating: 1000, count: 100)) == (0, bound / 1000))
        // A single post queued behind it goes first, and the batch fills what is left.
        #expect(StoreWriter.take(ordinary: [1], bulk: Array(repeating: 1000, count: 100)) == (1, bound / 1000 - 1))
        // Ordinary writes that fill the bound still let one bulk write in (no starvation).
        #expect(StoreWriter.take(ordinary: Array(repeating: 1000, count: 10), bulk: [1000]) == (bound / 1000, 1))
        // One write larger than the bound goes alone.
        #expect(StoreWriter.take(ordinary: [], bulk: [bound + 1, 1]) == (0, 1))
        #expect(StoreWriter.take(ordinary: [bound + 1, 1], bulk: []) == (1, 0))
        // Small writes: at most `maxBatch` of them.
        #expect(StoreWriter.take(ordinary: Array(repeating: 1, count: 5000), bulk: []).ordinary == StoreWriter.maxBatch)
        #expect(StoreWriter.take(ordinary: [], bulk: []) == (0, 0))
    }

    /// Idle: a probe tells. Busy: the last transaction's fate, unless the running one is stuck.
    @Test func readinessNeverWaitsForABusyWriter() {
        var health = WriterHealth()
        #expect(health.readiness(idle: true, now: 0) == .probe)
        health.began(at: 1000)
        #expect(health.readiness(idle: false, now: 1500) == .ready)
        #expect(health.readiness(idle: false, now: 1000 + WriterHealth.stallMilliseconds + 1) == .unready)
        health.finished(committed: false)
        health.began(at: 2000)
        #expect(health.readiness(idle: false, now: 2001) == .unready)
        #expect(health.readiness(idle: true, now: 2001) == .probe)  // the probe decides again
        health.finished(committed: true)
        #expect(health.readiness(idle: false, now: 2002) == .ready)
    }

    /// Outcomes arrive in any order (and in several transactions); the batch is answered once,
    /// when the last one is in, in item order — or with the first failure.
    @Test func aBatchIsAnsweredOnceEveryMessageHasItsOutcome() throws {
        var tally = BatchTally(count: 3)
        #expect(tally.record(2, .success(.conflict)) == nil)
        #expect(tally.record(0, .success(.replay([]))) == nil)
        let done = tally.record(1, .success(.accepted([])))
        let outcomes = try #require(try done?.get())
        #expect(outcomes.count == 3)
        if case .replay = outcomes[0], case .accepted = outcomes[1], case .conflict = outcomes[2] {
        } else {
            Issue.record("outcomes out of order: \(outcomes)")
        }

        var failing = BatchTally(count: 2)
        #expect(failing.record(0, .failure(.closed)) == nil)
        let failed = failing.record(1, .success(.conflict))
        #expect(failed != nil)
        #expect(throws: StoreError.self) { try failed?.get() }
    }
}
