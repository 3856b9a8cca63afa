import RelayLocks

/// Copies SQLite's write-ahead log into the database file on a thread of its own, as
/// `CheckpointSchedule` decides.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the
/// writer's thread: ~1,600 page writes at random places and a sync of the database file, during
/// which every write queued behind waited.
final class WALCheckpointer: @unchecked Sendable {
    /// Used on the checkpointer's thread only (hence `@unchecked`).
    private let connection: SQLiteConnection
    private let onFailure: @Sendable (DatabaseError) -> Void
    /// Asks the writer to commit at the end of its current group (`CheckpointSchedule`).
    private let requestCommit: @Sendable () -> Void

    private struct State {
        var schedule: CheckpointSchedule
        var due = false
        var stopping = false
        var stopped = false
    }

    private let state: LockedValue<State>

    /// Opens its own connection to the database at `path`; `onFailure` hears of a checkpoint
    /// that failed (once, until one succeeds again): the log keeps everything meanwhile.
    init(
        path: String, schedule: CheckpointSchedule, requestCommit: @escaping @Sendable () -> Void,
        onFailure: @escaping @Sendable (DatabaseError) -> Void
    ) throws(DatabaseError) {
        connection = try SQLiteConnection(path: path)
        // (A connection that has not read the database yet does not know it is in WAL mode,
        // and its checkpoints would do nothing.)
        try connection.execute("PRAGMA journal_mode = WAL")
        // The database file is synced before the log may start over on top of what was copied.
        try connection.execute("PRAGMA synchronous = FULL")
        self.onFailure = onFailure
        state = LockedValue(State(schedule: schedule))
        self.requestCommit = requestCommit
    }

    /// The writer committed and the log holds `logPages` (`SQLiteConnection.onCommit`); true
    /// when the writer should copy the rest itself now. Never waits.
    func committed(logPages: Int) -> Bool {
        let action = state.withLock { state in
            // (No thread: the writer copies, as SQLite's own checkpoint would.)
            if state.stopped { return logPages >= state.schedule.threshold ? CheckpointSchedule.Action.inline : .none }
            let action = state.schedule.committed(logPages: logPages)
            if action == .background { state.due = true }
            return action
        }
        if action == .background { state.signal() }
        return action == .inline
    }

    func start() {
        guard ServiceThread.start("relay-checkpoint", { [self] in run() }) == nil else { return }
        state.withLock { $0.stopped = true }
    }

    /// Waits for a pass under way; the last connection's close copies the rest.
    func stop() {
        state.withLock { $0.stopping = true }
        state.broadcast()
        state.withLock(when: { $0.stopped }) { _ in }
    }

    private func run() {
        while true {
            let go = state.withLock(when: { $0.due || $0.stopping }) { state in
                state.due = false
                return !state.stopping
            }
            guard go else { break }
            var pass = (logPages: 0, copied: Int?.none)
            do throws(DatabaseError) {
                let done = try connection.checkpoint()
                pass = (done.logPages, done.copied)
            } catch {
                // Reported once per run of failures (the schedule knows whether the last failed).
                if !state.withLock({ $0.schedule.failing }) { onFailure(error) }
            }
            switch state.withLock({ $0.schedule.finished(logPages: pass.logPages, copiedThrough: pass.copied) }) {
            case .none: break
            case .commitEarly: requestCommit()
            case .passAgain: state.withLock { $0.due = true }
            }
        }
        state.withLock { $0.stopped = true }
        state.broadcast()
    }
}
