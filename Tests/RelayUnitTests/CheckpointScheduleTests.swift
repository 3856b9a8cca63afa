import RelayStore
import Testing

/// When the write-ahead log is copied into the database, and by whom (`CheckpointSchedule`).
@Suite struct CheckpointScheduleTests {
    /// The schedule, fed as the writer's commits and the checkpointer's passes feed it.
    final class Driven {
        var schedule = CheckpointSchedule(threshold: 100, limit: 1000)
        func commit(_ pages: Int) -> CheckpointSchedule.Action { schedule.committed(logPages: pages) }
        func pass(_ pages: Int, copied: Int?) -> CheckpointSchedule.FollowUp {
            schedule.finished(logPages: pages, copiedThrough: copied)
        }
    }

    @Test func aPassRunsInTheBackgroundPerThresholdOfNewPages() {
        let driven = Driven()
        #expect(driven.commit(99) == .none)
        #expect(driven.commit(100) == .background)
        #expect(driven.commit(250) == .none, "one pass at a time")
        #expect(driven.pass(100, copied: 100) == .none)
        #expect(driven.commit(300) == .background)
        #expect(driven.pass(300, copied: 300) == .none)
        #expect(driven.commit(399) == .none, "99 new pages since")
        #expect(driven.commit(400) == .background)
        #expect(driven.pass(400, copied: 400) == .none)
        // The log started over (the writer opened a transaction with all of it copied).
        #expect(driven.commit(30) == .none)
        #expect(driven.schedule.copied == 0)
        #expect(driven.commit(100) == .background)
    }

    @Test func pastTheLimitTheWriterCopiesACommitMadeSmall() {
        let driven = Driven()
        #expect(driven.commit(1200) == .background, "past the limit: a pass first")
        // It copied all it found: the writer is asked to commit early, and copies that commit.
        #expect(driven.pass(1200, copied: 1200) == .commitEarly)
        #expect(driven.commit(1230) == .inline)
        #expect(driven.schedule.copied == 1230 && !driven.schedule.restartReady)
        #expect(driven.commit(12) == .none, "it started over")
        // A commit came during the pass (more than the writer should copy): another pass first.
        #expect(driven.commit(1200) == .background)
        #expect(driven.commit(1300) == .none)
        #expect(driven.pass(1200, copied: 1200) == .passAgain)
        #expect(driven.schedule.running)
        #expect(driven.commit(1305) == .none, "the second pass runs")
        #expect(driven.pass(1300, copied: 1300) == .commitEarly, "5 new pages: the writer's")
        #expect(driven.commit(1310) == .inline)
        // The log started over while a pass ran: what it reports is the old log's.
        #expect(driven.commit(12) == .none)
        #expect(driven.commit(1200) == .background)
        #expect(driven.commit(40) == .none)
        #expect(driven.pass(1200, copied: 1200) == .none)
        #expect(driven.schedule.copied == 0 && !driven.schedule.restartReady)
    }

    @Test func aPassThatCouldNotCopyAllDoesNotHandTheRestToTheWriter() {
        let driven = Driven()
        #expect(driven.commit(1200) == .background)
        // A reader still needed older pages: frames remain, and copying them would wait for it.
        #expect(driven.pass(1200, copied: 900) == .none)
        // Past the limit each commit starts a pass.
        #expect(driven.commit(1300) == .background)
        #expect(driven.pass(1300, copied: nil) == .none, "a failed pass")
        #expect(driven.commit(1999) == .background, "below twice the limit: passes go on")
        #expect(driven.pass(1999, copied: nil) == .none)
        // Twice the limit and the passes fail: the writer copies, as SQLite's checkpoint would.
        #expect(driven.commit(2000) == .inline)
        #expect(driven.commit(2100) == .inline, "until the log starts over or a pass succeeds")
        #expect(driven.commit(50) == .none)
        #expect(driven.commit(150) == .background)
        #expect(driven.pass(150, copied: 150) == .none)
        // A reader that holds the log is no reason for the writer to copy: passes go on.
        #expect(driven.commit(1200) == .background)
        #expect(driven.pass(1200, copied: 900) == .none)
        #expect(driven.commit(2100) == .background)
        #expect(driven.pass(2100, copied: 1500) == .none)
        #expect(driven.commit(4000) == .background)
    }
}
