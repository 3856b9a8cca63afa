import RelayStore
import Testing

/// When the write-ahead log is copied into the database, and by whom (`CheckpointSchedule`).
@Suite struct CheckpointScheduleTests {
    @Test func aPassRunsInTheBackgroundPerThresholdOfNewPages() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> Bool { schedule.finished(logPages: pages, copiedThrough: copied) }
        #expect(commit(99) == .none)
        #expect(commit(100) == .background)
        #expect(commit(250) == .none, "one pass at a time")
        #expect(!pass(100, copied: 100))
        #expect(commit(199) == .none, "99 new pages since")
        #expect(commit(200) == .background)
        #expect(!pass(200, copied: 200))
        // The log started over (the writer opened a transaction with all of it copied).
        #expect(commit(30) == .none)
        #expect(schedule.copied == 0)
        #expect(commit(100) == .background)
    }

    @Test func pastTheLimitTheWriterCopiesACommitMadeSmall() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> Bool { schedule.finished(logPages: pages, copiedThrough: copied) }
        #expect(commit(1200) == .background, "past the limit: a pass first")
        // It copied all it found: the writer is asked to commit early, and copies that commit.
        #expect(pass(1200, copied: 1200))
        #expect(commit(1230) == .inline)
        #expect(schedule.copied == 1230 && !schedule.restartReady)
        #expect(commit(12) == .none, "it started over")
    }

    @Test func aPassThatCouldNotCopyAllDoesNotHandTheRestToTheWriter() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> Bool { schedule.finished(logPages: pages, copiedThrough: copied) }
        #expect(commit(1200) == .background)
        // A reader still needed older pages: frames remain, and copying them would wait for it.
        #expect(!pass(1200, copied: 900))
        #expect(commit(1300) == .background)
        #expect(!pass(1300, copied: nil), "a failed pass")
        #expect(commit(1400) == .background)
        #expect(pass(1400, copied: 1400))
        #expect(commit(1450) == .inline)
        // The log did not start over (a reader held it): past the limit each commit starts a
        // pass; at twice the limit the writer copies what it can, whatever the passes did.
        #expect(commit(1500) == .background)
        #expect(!pass(1500, copied: nil), "a failed pass")
        #expect(commit(1999) == .background)
        #expect(!pass(1999, copied: 1500))
        #expect(commit(2000) == .inline)
    }
}
