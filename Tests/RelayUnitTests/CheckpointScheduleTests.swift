import RelayStore
import Testing

/// When the write-ahead log is copied into the database, and by whom (`CheckpointSchedule`).
@Suite struct CheckpointScheduleTests {
    @Test func aPassRunsInTheBackgroundPerThresholdOfNewPages() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> CheckpointSchedule.FollowUp {
            schedule.finished(logPages: pages, copiedThrough: copied)
        }
        #expect(commit(99) == .none)
        #expect(commit(100) == .background)
        #expect(commit(250) == .none, "one pass at a time")
        #expect(pass(100, copied: 100) == .none)
        #expect(commit(300) == .background)
        #expect(pass(300, copied: 300) == .none)
        #expect(commit(399) == .none, "99 new pages since")
        #expect(commit(400) == .background)
        #expect(pass(400, copied: 400) == .none)
        // The log started over (the writer opened a transaction with all of it copied).
        #expect(commit(30) == .none)
        #expect(schedule.copied == 0)
        #expect(commit(100) == .background)
    }

    @Test func pastTheLimitTheWriterCopiesACommitMadeSmall() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> CheckpointSchedule.FollowUp {
            schedule.finished(logPages: pages, copiedThrough: copied)
        }
        #expect(commit(1200) == .background, "past the limit: a pass first")
        // It copied all it found: the writer is asked to commit early, and copies that commit.
        #expect(pass(1200, copied: 1200) == .commitEarly)
        #expect(commit(1230) == .inline)
        #expect(schedule.copied == 1230 && !schedule.restartReady)
        #expect(commit(12) == .none, "it started over")
        // A commit came during the pass (more than the writer should copy): another pass first.
        #expect(commit(1200) == .background)
        #expect(commit(1300) == .none)
        #expect(pass(1200, copied: 1200) == .passAgain)
        #expect(schedule.running)
        #expect(commit(1305) == .none, "the second pass runs")
        #expect(pass(1300, copied: 1300) == .commitEarly, "5 new pages: the writer's")
        #expect(commit(1310) == .inline)
        // The log started over while a pass ran: what it reports is the old log's.
        #expect(commit(12) == .none)
        #expect(commit(1200) == .background)
        #expect(commit(40) == .none)
        #expect(pass(1200, copied: 1200) == .none)
        #expect(schedule.copied == 0 && !schedule.restartReady)
    }

    @Test func aPassThatCouldNotCopyAllDoesNotHandTheRestToTheWriter() {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> CheckpointSchedule.FollowUp {
            schedule.finished(logPages: pages, copiedThrough: copied)
        }
        #expect(commit(1200) == .background)
        // A reader still needed older pages: frames remain, and copying them would wait for it.
        #expect(pass(1200, copied: 900) == .none)
        // Past the limit each commit starts a pass.
        #expect(commit(1300) == .background)
        #expect(pass(1300, copied: nil) == .none, "a failed pass")
        #expect(commit(1999) == .background, "below twice the limit: passes go on")
        #expect(pass(1999, copied: nil) == .none)
        // Twice the limit and the passes fail: the writer copies, as SQLite's checkpoint would.
        #expect(commit(2000) == .inline)
        #expect(commit(2100) == .inline, "until the log starts over or a pass succeeds")
        #expect(commit(50) == .none)
        #expect(commit(150) == .background)
        #expect(pass(150, copied: 150) == .none)
        // A reader that holds the log is no reason for the writer to copy: passes go on.
        #expect(commit(1200) == .background)
        #expect(pass(1200, copied: 900) == .none)
        #expect(commit(2100) == .background)
        #expect(pass(2100, copied: 1500) == .none)
        #expect(commit(4000) == .background)
    }
}
