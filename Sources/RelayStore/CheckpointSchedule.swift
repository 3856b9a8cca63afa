/// When SQLite's write-ahead log is copied into the database file, and by whom: a pure state
/// machine (`WALCheckpointer` is its shell; the writer's commits and the passes' ends are its
/// inputs).
///
/// A checkpoint on a thread of its own keeps the writer from waiting for page writes and the
/// database file's sync. But the log starts over from its beginning only when the writer opens
/// a transaction while every frame is copied, and under a steady stream of writes it opens the
/// next one at once after each commit, before any pass could catch up. So passes run in the
/// background whenever `threshold` new pages wait, and the log grows meanwhile (a writer that
/// pauses lets it start over). Past `limit`, a pass that copied all it found asks the writer to
/// commit early; that commit holds only what came during the pass, and the writer copies it
/// itself before its next transaction, which starts the log over.
package struct CheckpointSchedule: Sendable {
    /// New pages in the log from which a background pass is due.
    package let threshold: Int
    /// The log's size from which it is made to start over.
    package let limit: Int
    /// A background pass is under way.
    package private(set) var running = false
    /// How many of the log's frames are known to be copied (0 once the log started over).
    package private(set) var copied = 0
    /// A pass past `limit` copied everything: the next commit is copied by the writer.
    package private(set) var restartReady = false

    package enum Action: Equatable, Sendable {
        case none
        /// Wake the checkpointer's thread.
        case background
        /// Copy the rest on the writer's connection, now.
        case inline
    }

    /// A pass per 8,192 new pages, 32 MiB (SQLite's own default is 1,000: more lets a page that
    /// many commits change reach the database file once — 2.55 KB written per message under
    /// `wrk -c64` against 2.65 at 4,000); the log made to start over past 64 MiB.
    package static let standard = CheckpointSchedule(threshold: 8192, limit: 16384)

    package init(threshold: Int, limit: Int) {
        self.threshold = threshold
        self.limit = limit
    }

    /// The writer committed; the log now holds `logPages` frames.
    package mutating func committed(logPages: Int) -> Action {
        if logPages < copied {  // it started over
            copied = 0
            restartReady = false
        }
        guard !running else { return .none }
        // (Twice the limit: passes cannot keep up, or fail; the writer copies all there is.)
        if logPages >= limit && restartReady || logPages >= 2 * limit {
            copied = logPages
            restartReady = false
            return .inline
        }
        guard logPages - copied >= threshold || logPages >= limit else { return .none }
        running = true
        return .background
    }

    /// A background pass ended, having found `logPages` frames and copied the first
    /// `copiedThrough` (nil: it failed). True: ask the writer to commit now.
    package mutating func finished(logPages: Int, copiedThrough: Int?) -> Bool {
        running = false
        guard let copiedThrough else { return false }
        copied = max(copied, copiedThrough)
        restartReady = logPages >= limit && copiedThrough >= logPages
        return restartReady
    }
}
