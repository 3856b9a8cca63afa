/// Decides what a catch-up request may be answered with, before any row is read.
///
/// The promise is "exactly the range you missed, or an explicit resync": a cursor from another
/// epoch, from the future, or from before what was pruned gets `complete: false`.
package struct CatchUpWindow: Sendable, Equatable {
    /// Whether the answer covers every message after the cursor.
    package var complete: Bool
    /// Read rows with `seq > readAfter`; nil means read nothing (the cursor is meaningless here).
    package var readAfter: Int64?

    /// - Parameters:
    ///   - after: the client's cursor, the last seq it holds.
    ///   - clientEpoch: the epoch the cursor belongs to, when the client sent one.
    ///   - epoch, headSeq, prunedSeq: the inbox: its epoch, last seq given out, highest seq deleted.
    package init(after: Int64, clientEpoch: String?, epoch: String, headSeq: Int64, prunedSeq: Int64) {
        if let clientEpoch, clientEpoch != epoch {
            self = CatchUpWindow(complete: false, readAfter: nil)
        } else if after > headSeq {
            // A cursor ahead of the inbox belongs to some other inbox history: resync.
            self = CatchUpWindow(complete: false, readAfter: nil)
        } else if after < prunedSeq {
            // Something after the cursor is gone: hand back what is left, flagged incomplete.
            self = CatchUpWindow(complete: false, readAfter: after)
        } else {
            self = CatchUpWindow(complete: true, readAfter: after)
        }
    }

    init(complete: Bool, readAfter: Int64?) {
        self.complete = complete
        self.readAfter = readAfter
    }
}
