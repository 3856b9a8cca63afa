internal import CPostgres
import Glibc

/// One libpq connection. Not thread-safe, like `SQLiteConnection`: one thread uses it at a time.
///
/// Statements are prepared once per connection (named, with the `?` placeholders numbered) and
/// run with text parameters (blobs binary); results come back as text. A lost connection is
/// reopened by `beginWrite` or by the reader pool, never in the middle of a transaction.
package final class PostgresConnection: SQLConnection {
    let handle: OpaquePointer
    /// Prepared statement names by SQL text (the SQL as the store writes it).
    private var prepared: [String: String] = [:]
    /// Rows changed by the last `run` (in a pipeline: once its result was read).
    package var changes: Int {
        if pipeline != nil { readQueued() }
        return lastChanges
    }
    private var lastChanges = 0
    /// The pipelined write transaction in progress (`beginWrite`), if any.
    private var pipeline: PostgresPipeline?
    package let dialect = SQLDialect.postgres
    /// Notes of committed transactions whose publication failed: they go with the next one
    /// (`commitWrite`; see `PostgresCluster` for the format).
    private var unsent: [String] = []
    /// Who this node is in those notes (the listener skips its own).
    var nodeId = ""
    /// Run at every (re)connect: settings of this session.
    private let setup: String?

    /// Connects to `uri`, then runs `setup` (settings for the session; again after a reconnect).
    package init(uri: String, setup: String? = nil) throws(DatabaseError) {
        self.setup = setup
        guard let connection = PQconnectdb(uri) else {
            throw .postgres(PostgresError(sqlState: "", message: "out of memory", sql: nil))
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.text(PQerrorMessage(connection))
            PQfinish(connection)
            throw .postgres(PostgresError(sqlState: "", message: message, sql: nil))
        }
        handle = connection
        // Notices ("relation … already exists, skipping") are not errors: keep them off stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        if let setup { try exec(setup) }
    }

    deinit { PQfinish(handle) }

    /// The connection is gone (server restarted, network lost); `reconnect` may bring it back.
    package var isBroken: Bool { lost || PQstatus(handle) != CONNECTION_OK }

    /// A statement failed on the connection itself. libpq keeps `PQstatus` at OK after the
    /// statement that finds the server gone ("server closed the connection unexpectedly") until
    /// the next call: a read failing so was not retried afresh, and its connection went back to
    /// the pool.
    private var lost = false

    /// Reopens a broken connection with the same parameters.
    func reconnect() throws(DatabaseError) {
        guard isBroken else { return }
        PQreset(handle)
        lost = false
        prepared.removeAll()  // they lived in the old session
        guard !isBroken else { throw .postgres(PostgresError(sqlState: "", message: lastErrorMessage, sql: nil)) }
        if let setup { try exec(setup) }
    }

    var socket: Int32 { PQsocket(handle) }

    var lastErrorMessage: String { Self.text(PQerrorMessage(handle)) }

    // MARK: Statements

    package func execute(_ sql: String) throws(DatabaseError) {
        guard pipeline != nil else { return try exec(sql) }
        guard PQsendQueryParams(handle, sql, 0, nil, nil, nil, nil, 0) != 0 else { throw connectionError(sql) }
        PQclear(try awaitResult(of: sql))
    }

    /// Runs `sql` (one or more statements without parameters) outside a pipeline.
    private func exec(_ sql: String) throws(DatabaseError) {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql)
    }

    package func scan(
        _ sql: String, _ bindings: [SQLValue], row: (any SQLRow) throws(DatabaseError) -> Bool
    ) throws(DatabaseError) {
        let result: OpaquePointer?
        if pipeline != nil {
            try sendHeld()
            try send(prepared: sql, bindings)
            result = try awaitResult(of: sql)
        } else {
            result = try run(prepared: sql, bindings)
        }
        defer { PQclear(result) }
        let rows = PQntuples(result)
        var index: Int32 = 0
        while index < rows {
            guard try row(PostgresRow(result: result, row: index)) else { return }
            index += 1
        }
    }

    /// In a pipelined transaction, queued without waiting for its result (an error surfaces at
    /// the next statement that waits, or at the commit).
    package func run(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) {
        if pipeline != nil {
            pipeline?.hold(sql, bindings)
            return
        }
        let result = try run(prepared: sql, bindings)
        lastChanges = Int(Self.parseInt(PQcmdTuples(result)))
        PQclear(result)
    }

    /// Runs `sql` as a prepared statement; the caller clears the result.
    private func run(prepared sql: String, _ bindings: [SQLValue]) throws(DatabaseError) -> OpaquePointer? {
        let name = try statementName(sql)
        let result = withParameters(bindings) { values, lengths, formats in
            PQexecPrepared(handle, name, Int32(bindings.count), values, lengths, formats, 0)
        }
        do {
            try check(result, sql)
        } catch {
            PQclear(result)
            throw error
        }
        return result
    }

    /// Sends the held statements (`PostgresPipeline.held`).
    private func sendHeld() throws(DatabaseError) {
        guard let statements = pipeline?.takeHeld() else { return }
        for (sql, bindings) in statements {
            try send(prepared: sql, bindings)
            pipeline?.sent(.statement(sql: sql))
        }
    }

    /// Queues `sql` (prepared first if it is new to this session) in the pipeline.
    private func send(prepared sql: String, _ bindings: [SQLValue]) throws(DatabaseError) {
        let name: String
        if let known = prepared[sql] {
            name = known
        } else {
            name = "s\(prepared.count)"
            guard PQsendPrepare(handle, name, Self.numberPlaceholders(sql), 0, nil) != 0 else {
                throw connectionError(sql)
            }
            prepared[sql] = name
            pipeline?.sent(.prepare(sql: sql))
        }
        let sent = withParameters(bindings) { values, lengths, formats in
            PQsendQueryPrepared(handle, name, Int32(bindings.count), values, lengths, formats, 0)
        }
        guard sent != 0 else { throw connectionError(sql) }
    }

    /// Calls `body` with libpq's parameter arrays: every value's bytes in one buffer, text
    /// NUL-terminated, blobs binary.
    private func withParameters<T>(
        _ bindings: [SQLValue],
        _ body: ([UnsafePointer<CChar>?], [Int32], [Int32]) -> T
    ) -> T {
        var buffer: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        var nulls: [Bool] = []
        for value in bindings {
            offsets.append(buffer.count)
            switch value {
            case .null:
                lengths.append(0)
                formats.append(0)
                nulls.append(true)
            case .int(let number):
                buffer.append(contentsOf: String(number).utf8)
                buffer.append(0)
                lengths.append(0)
                formats.append(0)
                nulls.append(false)
            case .text(let text):
                buffer.append(contentsOf: text.utf8)
                buffer.append(0)
                lengths.append(0)
                formats.append(0)
                nulls.append(false)
            case .blob(let bytes):
                buffer.append(contentsOf: bytes)
                lengths.append(Int32(clamping: bytes.count))
                formats.append(1)
                nulls.append(false)
            }
        }
        return buffer.withUnsafeBufferPointer { bytes in
            let base = bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            let values: [UnsafePointer<CChar>?] = offsets.indices.map { index in
                nulls[index] ? nil : base.map { $0 + offsets[index] }
            }
            return body(values, lengths, formats)
        }
    }

    // MARK: Pipeline

    /// Sends what is queued and a sync point, reads the results of the commands before the last
    /// one sent (`sql`), then its own; the caller clears it. The first error of any of them is
    /// thrown.
    private func awaitResult(of sql: String) throws(DatabaseError) -> OpaquePointer? {
        guard PQpipelineSync(handle) != 0 else { throw connectionError(sql) }
        readQueued(syncing: false)
        let result = PQgetResult(handle)
        if result != nil { while let extra = PQgetResult(handle) { PQclear(extra) } }
        if !Self.readSync(handle) { pipeline?.fail(connectionError(sql)) }
        if let error = pipeline?.error {
            PQclear(result)
            throw error
        }
        guard result != nil else { throw connectionError(sql) }
        do {
            try check(result, sql)
        } catch {
            PQclear(result)
            pipeline?.fail(error)
            throw error
        }
        return result
    }

    /// Reads the answers to every queued command (`PostgresPipeline.read` keeps the first
    /// error). With `syncing`, the held statements and a sync point are sent first, unless the
    /// last command is one (the server holds its answers in a pipeline until then).
    private func readQueued(syncing: Bool = true) {
        guard pipeline != nil else { return }
        if syncing {
            do {
                try sendHeld()
            } catch {
                pipeline?.fail(error)
            }
        }
        guard var current = pipeline, !current.unread.isEmpty else { return }
        if syncing, current.needsSync {
            if PQpipelineSync(handle) != 0 { current.sent(.sync) } else { current.fail(connectionError(nil)) }
        }
        for command in current.takeUnread() {
            let answer: PostgresPipeline.Answer
            if command == .sync {
                guard !Self.readSync(handle) else { continue }
                answer = .failed(connectionError(nil))
            } else {
                answer = readAnswer(to: command)
            }
            switch current.read(command, answer) {
            case .none: break
            case .changes(let count): lastChanges = count
            case .forgetPrepared(let sql): prepared[sql] = nil
            }
        }
        pipeline = current
    }

    /// Reads the server's answer to one command of the pipeline (every result it has).
    private func readAnswer(to command: PostgresPipeline.Command) -> PostgresPipeline.Answer {
        guard let result = PQgetResult(handle) else { return .failed(connectionError(command.sql)) }
        defer {
            PQclear(result)
            while let extra = PQgetResult(handle) { PQclear(extra) }  // ends this command's results
        }
        do {
            try check(result, command.sql)
            return .done(tag: Self.text(PQcmdStatus(result)), changes: Int(Self.parseInt(PQcmdTuples(result))))
        } catch {
            return .failed(error)
        }
    }

    /// Ends the pipeline: a sync point, every result up to it read, back to one command at a
    /// time. Returns how its commit ended (nil without a pipeline).
    @discardableResult
    private func finishPipeline() -> PostgresPipeline.Outcome? {
        guard pipeline != nil else { return nil }
        readQueued()
        if PQexitPipelineMode(handle) == 0, PQpipelineSync(handle) != 0 {
            // Something was left unread (a lost connection mid-read): up to a last sync point.
            while let result = PQgetResult(handle) {
                let status = PQresultStatus(result)
                PQclear(result)
                if status == PGRES_PIPELINE_SYNC { break }
            }
            _ = PQexitPipelineMode(handle)
        }
        defer { pipeline = nil }
        return pipeline?.outcome
    }

    /// Reads the answer to a sync point; false if it is not one (the connection was lost).
    private static func readSync(_ handle: OpaquePointer) -> Bool {
        guard let result = PQgetResult(handle) else { return false }
        defer { PQclear(result) }
        return PQresultStatus(result) == PGRES_PIPELINE_SYNC
    }

    private func connectionError(_ sql: String?) -> DatabaseError {
        .postgres(PostgresError(sqlState: "", message: lastErrorMessage, sql: sql))
    }

    private func statementName(_ sql: String) throws(DatabaseError) -> String {
        if let name = prepared[sql] { return name }
        let name = "s\(prepared.count)"
        let result = PQprepare(handle, name, Self.numberPlaceholders(sql), 0, nil)
        defer { PQclear(result) }
        try check(result, sql)
        prepared[sql] = name
        return name
    }

    private func check(_ result: OpaquePointer?, _ sql: String) throws(DatabaseError) {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return
        default:
            let state = Self.text(PQresultErrorField(result, Int32(UInt8(ascii: "C"))))
            let message = result.map { Self.text(PQresultErrorMessage($0)) } ?? lastErrorMessage
            // No SQLSTATE on a failed statement: libpq's own report of a lost server (not a
            // pipeline's PGRES_PIPELINE_ABORTED, which follows another statement's error).
            if state.isEmpty, result == nil || PQresultStatus(result) == PGRES_FATAL_ERROR { lost = true }
            throw .postgres(PostgresError(sqlState: state, message: message, sql: sql))
        }
    }

    /// `?` → `$1`, `$2`, …; `?N` → `$N` (outside string literals).
    static func numberPlaceholders(_ sql: String) -> String {
        var output = ""
        var next = 0
        var inLiteral = false
        var scalars = sql.unicodeScalars.makeIterator()
        var pending = scalars.next()
        while let scalar = pending {
            pending = scalars.next()
            if scalar == "'" { inLiteral.toggle() }
            guard scalar == "?", !inLiteral else {
                output.unicodeScalars.append(scalar)
                continue
            }
            var digits = ""
            while let digit = pending, ("0"..."9").contains(digit) {
                digits.unicodeScalars.append(digit)
                pending = scalars.next()
            }
            if digits.isEmpty {
                next += 1
                digits = String(next)
            }
            output += "$" + digits
        }
        return output
    }

    /// With sequential scans priced out (for this transaction only): a test's table of a few
    /// rows would be scanned whole, where one of millions is read through the index.
    package func queryPlan(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) -> [String] {
        try readSnapshot { () throws(DatabaseError) in
            try execute("SET LOCAL enable_seqscan = off")
            var steps: [String] = []
            try query("EXPLAIN " + sql, bindings) { steps.append($0.text(0)) }
            return steps
        }
    }

    // MARK: Transactions

    package func schemaShape() throws(DatabaseError) -> SchemaShape {
        var shape = SchemaShape()
        try query(
            """
            SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
            """
        ) { shape.tables[$0.text(0), default: []].append($0.text(1)) }
        shape.tables = shape.tables.mapValues { $0.sorted() }
        // Indexes made by CREATE INDEX (not those behind a primary key or unique constraint).
        try query(
            """
            SELECT i.relname, t.relname, a.attname, x.indisunique::int FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, position)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            WHERE n.nspname = current_schema()
              AND NOT EXISTS (
                  SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.contype IN ('p', 'u', 'x'))
            ORDER BY i.relname, k.position
            """
        ) { row in
            let name = row.text(0)
            shape.indexes[name, default: SchemaShape.Index(table: row.text(1), columns: [], unique: row.int64(3) != 0)]
                .columns.append(row.text(2))
        }
        // An index ending in the table's `id` names the tie-break that a SQLite index has without
        // naming it (every SQLite index ends in the rowid, which `id` is): the same index.
        for (name, index) in shape.indexes where index.columns.count > 1 && index.columns.last == "id" {
            shape.indexes[name]?.columns.removeLast()
        }
        try query(
            """
            SELECT g.tgname FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            WHERE n.nspname = current_schema() AND NOT g.tgisinternal
            """
        ) { shape.triggers.insert($0.text(0)) }
        return shape
    }

    package func readSnapshot<T>(_ body: () throws(DatabaseError) -> T) throws(DatabaseError) -> T {
        try execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    /// With `pipelined`, statements whose results are not needed (`run`) are sent without
    /// waiting for them: for a batch run without savepoints, which fails whole anyway.
    package func beginWrite(pipelined: Bool) throws(DatabaseError) -> Bool {
        try reconnect()
        do {
            try execute("BEGIN")
        } catch  where isBroken {
            // Lost while idle (the server restarted): nothing was started, so once more afresh.
            try reconnect()
            try execute("BEGIN")
        }
        guard pipelined, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) == PQTRANS_INTRANS,
            PQenterPipelineMode(handle) != 0
        else { return false }
        pipeline = PostgresPipeline()
        return true
    }

    /// Sends `COMMIT` and, queued behind it, the transaction that publishes the notes, then
    /// reads every result in one round trip. If a pipelined statement had failed, the server
    /// skipped everything after it: neither the commit nor the publication happened.
    package func commitWrite(effect: WriteEffect, notes: [ClusterNote]) throws(DatabaseError) {
        var notes = notes.map(\.line)
        if effect == .jobs { notes.append(ClusterNote.jobs.line) }
        if pipeline == nil {
            guard PQenterPipelineMode(handle) != 0 else { throw connectionError("COMMIT") }
            pipeline = PostgresPipeline()
        }
        try sendHeld()
        try send("COMMIT", [], as: .commit)
        if effect > .maintenance || !unsent.isEmpty { try sendPublication(unsent + notes) }
        switch finishPipeline() {
        case .failed(let error):
            throw error
        case .rolledBack, nil:
            throw .postgres(PostgresError(sqlState: "40000", message: "the transaction was rolled back", sql: "COMMIT"))
        case .committed(publicationFailed: true):
            // Committed all the same; the notes wait for the next commit.
            unsent += notes
            if PQtransactionStatus(handle) == PQTRANS_INERROR { _ = try? execute("ROLLBACK") }
        case .committed(publicationFailed: false):
            unsent.removeAll(keepingCapacity: true)
        }
    }

    package func rollbackWrite() {
        _ = pipeline?.takeHeld()  // (never sent: the transaction is rolled back)
        finishPipeline()
        _ = try? execute("ROLLBACK")
    }

    package func savepoint() throws(DatabaseError) { try run("SAVEPOINT op") }

    package func releaseSavepoint() throws(DatabaseError) { try run("RELEASE SAVEPOINT op") }

    package func rollbackToSavepoint() {
        _ = try? run("ROLLBACK TO SAVEPOINT op")
        _ = try? run("RELEASE SAVEPOINT op")
    }

    /// The notes as `pg_notify` calls in a transaction of their own that does not wait for its
    /// WAL flush: a commit that notifies holds a database-wide lock from its notify to its end, so
    /// inside the write transaction it would serialize every node's commits, each one's flush
    /// included. The notes only point at rows already committed; if this transaction is lost in
    /// a crash, the listeners' resync covers it. One `pg_notify` per 7,000 bytes of notes
    /// (PostgreSQL takes 8,000 per payload); with no notes, one that only says this node wrote
    /// (the delivering node's retention hears of it).
    private func sendPublication(_ lines: [String]) throws(DatabaseError) {
        try send("BEGIN", [], as: .publication(sql: "BEGIN"))
        let local = "SELECT set_config('synchronous_commit', 'off', true)"
        try send(local, [], as: .publication(sql: local))
        let notify = "SELECT pg_notify($1, $2)"
        var payload = nodeId
        for line in lines {
            if payload.utf8.count + line.utf8.count > 7000 {
                try send(notify, [.text(PostgresCluster.channel), .text(payload)], as: .publication(sql: notify))
                payload = nodeId
            }
            payload += "\n" + line
        }
        try send(notify, [.text(PostgresCluster.channel), .text(payload)], as: .publication(sql: notify))
        try send("COMMIT", [], as: .publication(sql: "COMMIT"))
    }

    /// Queues an unprepared command in the pipeline.
    private func send(_ sql: String, _ bindings: [SQLValue], as command: PostgresPipeline.Command) throws(DatabaseError)
    {
        let sent = withParameters(bindings) { values, lengths, formats in
            PQsendQueryParams(handle, sql, Int32(bindings.count), nil, values, lengths, formats, 0)
        }
        guard sent != 0 else { throw connectionError(sql) }
        pipeline?.sent(command)
    }

    // MARK: Values

    static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    static func text(_ pointer: UnsafeMutablePointer<CChar>?) -> String { text(UnsafePointer(pointer)) }

    /// A decimal integer as PostgreSQL writes it (0 for anything else).
    static func parseInt(_ pointer: UnsafePointer<CChar>?) -> Int64 {
        guard var cursor = pointer else { return 0 }
        let negative = cursor.pointee == CChar(UInt8(ascii: "-"))
        if negative { cursor += 1 }
        var value: Int64 = 0
        while cursor.pointee >= CChar(UInt8(ascii: "0")), cursor.pointee <= CChar(UInt8(ascii: "9")) {
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            guard !overflow else { return 0 }
            let (sum, carry) = shifted.addingReportingOverflow(Int64(cursor.pointee - CChar(UInt8(ascii: "0"))))
            guard !carry else { return 0 }
            value = sum
            cursor += 1
        }
        return negative ? -value : value
    }

    static func parseInt(_ pointer: UnsafeMutablePointer<CChar>?) -> Int64 { parseInt(UnsafePointer(pointer)) }
}

/// One row of a PostgreSQL result (text format).
struct PostgresRow: SQLRow {
    let result: OpaquePointer?
    let row: Int32

    func isNull(_ column: Int32) -> Bool { PQgetisnull(result, row, column) != 0 }

    func int64(_ column: Int32) -> Int64 { PostgresConnection.parseInt(PQgetvalue(result, row, column)) }

    func text(_ column: Int32) -> String { String(decoding: borrowedText(column), as: UTF8.self) }

    func borrowedText(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        guard let value = PQgetvalue(result, row, column) else { return UnsafeBufferPointer(start: nil, count: 0) }
        let count = Int(PQgetlength(result, row, column))
        return UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: count)
    }

    func bytes(_ column: Int32) -> [UInt8] {
        guard let value = PQgetvalue(result, row, column) else { return [] }
        let count = Int(PQgetlength(result, row, column))
        return value.withMemoryRebound(to: UInt8.self, capacity: count) { start in
            let raw = UnsafeBufferPointer(start: start, count: count)
            // bytea comes as `\x` and hex digits in text format.
            guard PQftype(result, column) == Self.byteaType, count >= 2, raw[0] == 0x5C, raw[1] == 0x78 else {
                return Array(raw)
            }
            return Self.unhex(raw.dropFirst(2))
        }
    }

    static let byteaType: UInt32 = 17

    static func unhex(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> [UInt8] {
        func nibble(_ byte: UInt8) -> UInt8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return 0
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = digits.startIndex
        while index + 1 < digits.endIndex {
            bytes.append(nibble(digits[index]) << 4 | nibble(digits[index + 1]))
            index += 2
        }
        return bytes
    }
}
