internal import CSQLite
internal import CWALBuffer
import Glibc

/// One SQLite connection. Not thread-safe: each connection is used by one thread at a time —
/// the writer thread owns one, and `ReaderPool` lends the others out exclusively.
package final class SQLiteConnection: SQLConnection {
    let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]
    /// The last statements `statement(_:)` handed out (a ring), looked at before `statements`.
    private var recent: [(sql: String, statement: SQLiteStatement)?] = Array(repeating: nil, count: 8)
    private var nextRecent = 0
    /// What `onCommit` registered: SQLite holds only a pointer to it.
    private var commitHook: CommitHook?

    /// Configures the library once, before the first connection initializes it.
    private static let configured: Void = { _ = pr_sqlite3_disable_memstatus() }()

    /// With `buffersLog`, the connection writes its log through `CWALBuffer` (one `pwrite` per
    /// commit instead of two per page): only for a connection whose every commit syncs
    /// (`synchronous=FULL`), since other connections read the log as soon as a commit is listed.
    package init(path: String, readOnly: Bool = false, buffersLog: Bool = false) throws(DatabaseError) {
        Self.configured
        try Self.refuseSymbolicLinks(path)
        if !readOnly { Self.createPrivately(path) }
        var db: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let vfs = buffersLog && !readOnly && pr_wal_buffer_register() == SQLITE_OK ? PR_WAL_BUFFER_VFS : nil
        let rc = sqlite3_open_v2(path, &db, flags, vfs)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open database"
            sqlite3_close_v2(db)
            throw .sqlite(SQLiteError(code: rc, message: message, sql: nil))
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
        sqlite3_extended_result_codes(db, 1)
    }

    /// The files SQLite opens for a database, each of which it would follow if it were a link.
    private static func files(of path: String) -> [String] {
        [path, path + "-wal", path + "-shm", path + "-journal", path + "-log"]
    }

    /// Refuses a database whose file, `-wal`, `-shm` or `-journal` is a symbolic link, dangling or
    /// not: SQLite would follow it and create or fill its target (with the umask's mode, secrets
    /// and all) wherever it points. A link in a directory above is the operator's layout, and fine.
    private static func refuseSymbolicLinks(_ path: String) throws(DatabaseError) {
        for file in files(of: path) where isSymbolicLink(file) {
            throw .sqlite(
                SQLiteError(
                    code: SQLITE_CANTOPEN, message: "\(file) is a symbolic link; name the file itself", sql: nil))
        }
    }

    private static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    /// Creates a missing database file with mode 0600 whatever the umask: it holds the generated
    /// server key and secrets. SQLite gives its `-wal` and `-shm` files the database file's mode.
    /// (`O_NOFOLLOW`: a link put there since `refuseSymbolicLinks` is not followed either.)
    private static func createPrivately(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }  // it exists (or SQLite will report why it cannot be opened)
        _ = fchmod(fd, 0o600)
        close(fd)
    }

    /// Calls `body` after each commit of this connection with the pages the write-ahead log then
    /// holds; when it returns true, copies the log into the database there and then (a passive
    /// checkpoint). It replaces SQLite's automatic checkpoint (`WALCheckpointer`).
    func onCommit(_ body: @escaping @Sendable (_ logPages: Int) -> Bool) {
        let hook = CommitHook(body)
        commitHook = hook
        sqlite3_wal_hook(
            handle,
            { context, db, _, pages in
                guard let context, Unmanaged<CommitHook>.fromOpaque(context).takeUnretainedValue().body(Int(pages))
                else { return SQLITE_OK }
                // (Its failure does not fail the commit: the log keeps the pages.)
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                return SQLITE_OK
            }, Unmanaged.passUnretained(hook).toOpaque())
    }

    private final class CommitHook {
        let body: @Sendable (Int) -> Bool
        init(_ body: @escaping @Sendable (Int) -> Bool) { self.body = body }
    }

    /// Copies the write-ahead log's pages into the database file as far as no reader still
    /// needs older ones, without waiting for (or blocking) the writer or any reader (a passive
    /// checkpoint); returns the frames the log held and how many of them are copied. The log
    /// starts over when the writer opens a transaction with all of it copied.
    func checkpoint() throws(DatabaseError) -> (logPages: Int, copied: Int) {
        var logPages: Int32 = 0
        var copied: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logPages, &copied)
        guard rc == SQLITE_OK else {
            throw .sqlite(SQLiteError(code: rc, message: lastErrorMessage, sql: "checkpoint"))
        }
        return (Int(logPages), Int(copied))
    }

    deinit {
        sqlite3_wal_hook(handle, nil, nil)
        recent.removeAll()
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    package func execute(_ sql: String) throws(DatabaseError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(errorMessage)
            throw .sqlite(SQLiteError(code: rc, message: message, sql: sql))
        }
    }

    /// A prepared statement, cached per connection and reset for reuse.
    package func statement(_ sql: String) throws(DatabaseError) -> SQLiteStatement {
        // The statements run last are looked at first: the hot ones run again and again with the
        // same text, which `==` finds equal at once (same storage), where the table would hash
        // all of it (hundreds of bytes) every time.
        for case let (text, statement)? in recent where text == sql {
            statement.reset()
            return statement
        }
        let statement: SQLiteStatement
        if let cached = statements[sql] {
            cached.reset()
            statement = cached
        } else {
            statement = try SQLiteStatement(connection: self, sql: sql)
            statements[sql] = statement
        }
        recent[nextRecent] = (sql, statement)
        nextRecent = (nextRecent + 1) % recent.count
        return statement
    }

    package func scan(
        _ sql: String, _ bindings: [SQLValue], row: (any SQLRow) throws(DatabaseError) -> Bool
    ) throws(DatabaseError) {
        let statement = try statement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        while try statement.step() {
            guard try row(statement) else { return }
        }
    }

    /// Runs a statement that returns no rows (or ignores them).
    package func run(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) {
        let statement = try statement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        while try statement.step() {}
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    var lastErrorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    package let dialect = SQLDialect.sqlite
    package let isBroken = false

    package func queryPlan(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) -> [String] {
        var steps: [String] = []
        try query("EXPLAIN QUERY PLAN " + sql, bindings) { steps.append($0.text(3)) }
        return steps
    }

    package func schemaShape() throws(DatabaseError) -> SchemaShape {
        var shape = SchemaShape()
        try query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'") { row in
            let name = row.text(1)
            switch row.text(0) {
            case "table": shape.tables[name] = []
            // (No SQL: the index SQLite made for a PRIMARY KEY or UNIQUE constraint.)
            case "index" where !row.isNull(3):
                shape.indexes[name] = SchemaShape.Index(table: row.text(2), columns: [], unique: false)
            case "trigger": shape.triggers.insert(name)
            default: break
            }
        }
        for table in shape.tables.keys {
            var columns: [String] = []
            try query("SELECT name FROM pragma_table_info(?)", [.text(table)]) { columns.append($0.text(0)) }
            shape.tables[table] = columns.sorted()
            try query("SELECT name, \"unique\" FROM pragma_index_list(?)", [.text(table)]) { row in
                shape.indexes[row.text(0)]?.unique = row.int64(1) != 0
            }
        }
        for name in shape.indexes.keys {
            try query("SELECT name FROM pragma_index_info(?) ORDER BY seqno", [.text(name)]) {
                shape.indexes[name]?.columns.append($0.text(0))
            }
        }
        return shape
    }

    package func readSnapshot<T>(_ body: () throws(DatabaseError) -> T) throws(DatabaseError) -> T {
        try execute("BEGIN")
        defer { _ = try? execute("COMMIT") }
        return try body()
    }

    // MARK: Writes (one writer: BEGIN IMMEDIATE takes the write lock at once)

    // The hot ones run as cached prepared statements: `sqlite3_exec` parses its text every time,
    // and every write is wrapped in a savepoint (two parses per push).
    package func beginWrite(pipelined: Bool) throws(DatabaseError) -> Bool {
        try run("BEGIN IMMEDIATE", [])
        return false
    }

    /// Whether a transaction is open (SQLite rolls one back by itself on some errors).
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    package func commitWrite(effect: WriteEffect, notes: [ClusterNote]) throws(DatabaseError) { try run("COMMIT", []) }
    package func rollbackWrite() { _ = try? execute("ROLLBACK") }
    package func savepoint() throws(DatabaseError) { try run("SAVEPOINT op", []) }
    package func releaseSavepoint() throws(DatabaseError) { try run("RELEASE op", []) }

    package func rollbackToSavepoint() {
        _ = try? execute("ROLLBACK TO op")
        _ = try? execute("RELEASE op")
    }

    package var userVersion: Int {
        get throws(DatabaseError) {
            var version = 0
            let statement = try statement("PRAGMA user_version")
            defer { statement.reset() }
            if try statement.step() { version = Int(statement.int64(0)) }
            return version
        }
    }
}
