/// When SQLite's write-ahead log is copied into the database file, and by whom: a pure state
/// machine (`WALCheckpointer` is its shell; the writer's commits and the passes' ends are its
/// inputs).
///
/// A checkpoint on a thread of its own keeps the writer from waiting for page writes and the
/// database file's sync. But the log starts over from its beginning only when the writer opens
/// a transaction while every frame is copied (and no reader still reads older ones), and under a
/// steady stream of writes it opens the next one at once after each commit, before any pass
/// could catch up. So passes run in the background whenever `threshold` new pages wait, and the
/// log grows meanwhile (a writer that pauses lets it start over). Past `limit`, a pass that
/// copied all it found — and found little new at its end, else another pass runs — asks the
/// writer to commit early; that commit holds only what came during the pass, and the writer
/// copies the rest itself before its next transaction, which starts the log over.
package struct CheckpointSchedule: Sendable {
    /// New pages in the log from which a background pass is due.
    package let threshold: Int
    /// The log's size from which it is made to start over.
    package let limit: Int
    /// A background pass is under way.
    package private(set) var running = false
    /// How many of the log's frames are known to be copied (0 once the log started over).
    package private(set) var copied = 0
    /// The log's size at the writer's last commit.
    package private(set) var logged = 0
    /// A pass past `limit` copied everything: the next commit is copied by the writer.
    package private(set) var restartReady = false
    /// The last pass failed: at twice the limit the writer copies instead.
    package private(set) var failing = false

    package enum Action: Equatable, Sendable {
        case none
        /// Wake the checkpointer's thread.
        case background
        /// Copy the rest on the writer's connection, now.
        case inline
    }

    /// What follows a pass.
    package enum FollowUp: Equatable, Sendable {
        case none
        /// Ask the writer to commit now (`restartReady`).
        case commitEarly
        /// Run another pass at once: too much came while this one ran for the writer to copy.
        case passAgain
    }

    /// A pass per 8,192 new pages, 32 MiB (SQLite's own default is 1,000: more lets a page that
    /// many commits change reach the database file once — 2.55 KB written per message under
    /// `wrk -c64` against 2.65 at 4,000); the log made to start over past 64 MiB.
    package static let standard = CheckpointSchedule(threshold: 8192, limit: 16384)

    package init(threshold: Int, limit: Int) {
        self.threshold = threshold
        self.limit = limit
    }

    /// The most the writer copies itself after a pass past the limit: what a pass found at its
    /// end beyond this runs another pass first.
    var inlineAtMost: Int { max(threshold / 8, 1) }

    /// The writer committed; the log now holds `logPages` frames.
    package mutating func committed(logPages: Int) -> Action {
        if logPages < logged {  // it started over
            copied = 0
            restartReady = false
        }
        logged = logPages
        guard !running else { return .none }
        // (Passes keep failing: the writer copies all there is, as SQLite's own checkpoint would.)
        if logPages >= limit && restartReady || logPages >= 2 * limit && failing {
            copied = logPages
            restartReady = false
            return .inline
        }
        guard logPages - copied >= threshold || logPages >= limit else { return .none }
        running = true
        return .background
    }

    /// A background pass ended, having found `logPages` frames and copied the first
    /// `copiedThrough` (nil: it failed).
    package mutating func finished(logPages: Int, copiedThrough: Int?) -> FollowUp {
        guard let copiedThrough else {
            running = false
            failing = true
            return .none
        }
        failing = false
        guard logged >= logPages else {  // the log started over meanwhile: its numbers are the old log's
            running = false
            return .none
        }
        copied = max(copied, copiedThrough)
        guard logPages >= limit, copiedThrough >= logPages else {
            running = false
            return .none
        }
        if logged - copiedThrough > inlineAtMost { return .passAgain }  // (still running)
        running = false
        restartReady = true
        return .commitEarly
    }
}
