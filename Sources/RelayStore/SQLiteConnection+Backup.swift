internal import CSQLite
import Glibc
import RelayLog

extension SQLiteConnection {
    /// Copies this database into a new file at `path` with SQLite's online backup: a consistent
    /// snapshot (one read transaction) while the relay keeps writing. The copy is created 0600,
    /// like the database; an existing file at `path` (a symbolic link too, even dangling) is
    /// refused rather than overwritten.
    package func backup(to path: String) throws(DatabaseError) {
        var info = stat()
        guard lstat(path, &info) != 0 else {
            let what = info.st_mode & S_IFMT == S_IFLNK ? "is a symbolic link" : "exists"
            throw .sqlite(SQLiteError(code: SQLITE_CANTOPEN, message: "\(path) \(what); choose a new file", sql: nil))
        }
        let destination = try SQLiteConnection(path: path)
        guard let backup = sqlite3_backup_init(destination.handle, "main", handle, "main") else {
            throw .sqlite(SQLiteError(code: SQLITE_ERROR, message: destination.lastErrorMessage, sql: nil))
        }
        var rc: Int32
        repeat {
            rc = sqlite3_backup_step(backup, -1)
            if rc & 0xFF == SQLITE_BUSY || rc & 0xFF == SQLITE_LOCKED { usleep(20_000) }
        } while rc == SQLITE_OK || rc & 0xFF == SQLITE_BUSY || rc & 0xFF == SQLITE_LOCKED
        let finished = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE, finished == SQLITE_OK else {
            throw .sqlite(
                SQLiteError(code: rc == SQLITE_DONE ? finished : rc, message: destination.lastErrorMessage, sql: nil))
        }
    }
}

extension SQLStore {
    /// Backs the database at `path` up into `destination` (see `SQLiteConnection.backup`), with
    /// every write the relay acknowledged before: those its database has not taken yet are in its
    /// message log, read first and run on the copy as a start after a crash would run them
    /// (`StatementJournal`). The relay empties its log only once its database holds all of it,
    /// so whatever the log's copy lacks, the database's copy, made after, has.
    package static func backup(path: String, to destination: String) throws(StoreError) {
        let copiedLog = destination + "-log"
        do throws(DatabaseError) {
            let records: [[UInt8]]
            do throws(MessageLog.Failure) { records = try MessageLog.records(at: path + "-log") } catch {
                throw .journal(.log(error))
            }
            var info = stat()
            guard lstat(copiedLog, &info) != 0 else {
                let message = "\(copiedLog) exists; choose a new file"
                throw .sqlite(SQLiteError(code: SQLITE_CANTOPEN, message: message, sql: nil))
            }
            try SQLiteConnection(path: path, readOnly: true).backup(to: destination)
            guard !records.isEmpty else { return }
            defer { unlink(copiedLog) }
            do throws(MessageLog.Failure) { try MessageLog(path: copiedLog).append(records) } catch {
                throw .journal(.log(error))
            }
            _ = try StatementJournal(path: copiedLog, connection: SQLiteConnection(path: destination), logLimit: 0)
        } catch {
            throw .unavailable(error)
        }
    }

    /// Gives every inbox of the database at `path` a new epoch (and the database a new epoch key,
    /// so that inboxes created later get new epochs too). Done to a backup copy: once it is
    /// restored, every client's cursor names an old epoch and it resyncs (`complete: false`)
    /// instead of resuming from seqs the restored relay will hand out again.
    package static func renewEpochs(path: String) throws(StoreError) {
        let epochs = InboxEpochs(key: InboxEpochs.newKey())
        do throws(DatabaseError) {
            let connection = try SQLiteConnection(path: path)
            try connection.execute("BEGIN IMMEDIATE")
            do throws(DatabaseError) {
                var users: [String] = []
                try connection.query("SELECT user_id FROM inboxes") { users.append($0.text(0)) }
                for user in users {
                    try connection.run(
                        "UPDATE inboxes SET epoch = ? WHERE user_id = ?", [.text(epochs.epoch(for: user)), .text(user)])
                }
                try connection.run(
                    "INSERT INTO meta(key, value) VALUES ('epoch_key', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    [.text(epochs.key)])
                // A new log id too: the source's message log, left beside a restored copy, is
                // refused rather than run into it (`StatementJournal`).
                try connection.run(
                    "UPDATE meta SET value = lower(hex(randomblob(8))) WHERE key = 'log_id'")
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
        } catch {
            throw .unavailable(error)
        }
    }

    /// The secrets the database holds (generated on a relay's first start), read without
    /// creating or changing anything: empty when there is no database yet.
    package static func storedSecrets(database: String) throws(StoreError) -> [String: String] {
        do {
            let connection: any SQLConnection
            let hasMeta: String
            if isPostgres(database) {
                connection = try PostgresConnection(uri: database)
                hasMeta = "SELECT 1 WHERE to_regclass('meta') IS NOT NULL"
            } else {
                guard access(database, F_OK) == 0 else { return [:] }
                connection = try SQLiteConnection(path: database, readOnly: true)
                hasMeta = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
            }
            var found = false
            try connection.query(hasMeta) { _ in found = true }
            guard found else { return [:] }
            var secrets: [String: String] = [:]
            try connection.query("SELECT key, value FROM meta") { secrets[$0.text(0)] = $0.text(1) }
            return secrets
        } catch {
            throw .unavailable(error)
        }
    }
}
