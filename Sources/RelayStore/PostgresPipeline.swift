/// A pipelined write transaction on one PostgreSQL connection, as a pure machine: the commands
/// sent and not read yet, the statements held back until the next sync point, and what the
/// answers read so far mean (the first error, the commit's tag, a failed publication).
/// `PostgresConnection` makes the libpq calls and tells it what it sent and read.
package struct PostgresPipeline {
    package enum Command: Equatable, Sendable {
        case prepare(sql: String)
        case statement(sql: String)
        /// The write transaction's `COMMIT`: its tag tells whether it committed.
        case commit
        /// A command of the transaction that publishes the notes: a failure is only noted.
        case publication(sql: String)
        /// A sync point: everything before it is answered, and the server then waits for the
        /// next command *idle in transaction* — only there does its
        /// `idle_in_transaction_session_timeout` run, so a node that stops while it builds the
        /// rest of a batch frees its locks after the lease (within a pipeline the server counts
        /// itself busy).
        case sync

        /// The SQL an error names.
        package var sql: String {
            switch self {
            case .prepare(let sql), .statement(let sql), .publication(let sql): sql
            case .commit: "COMMIT"
            case .sync: "SYNC"
            }
        }
    }

    /// What the server answered to one command.
    package enum Answer {
        /// `tag` is its command status (`COMMIT`, `ROLLBACK`, …), `changes` its row count.
        case done(tag: String, changes: Int)
        case failed(DatabaseError)
    }

    /// What the connection does about an answer.
    package enum FollowUp: Equatable, Sendable {
        case none
        /// A statement's row count, for `changes`.
        case changes(Int)
        /// The statement could not be prepared: it does not exist in the session, so it is
        /// prepared afresh next time.
        case forgetPrepared(sql: String)
    }

    /// How the commit ended, once every answer was read.
    package enum Outcome {
        case committed(publicationFailed: Bool)
        /// A transaction that had failed answers `COMMIT` with `ROLLBACK`: nothing was stored.
        case rolledBack
        case failed(DatabaseError)
    }

    package private(set) var unread: [Command] = []
    /// Statements whose results are not needed (`run`), held until the next sync point and sent
    /// right before it: libpq would otherwise send them as its buffer fills, and the server,
    /// given part of a pipeline, waits for the rest counting itself busy — no idle timeout — for
    /// as long as this node takes to build it.
    package private(set) var held: [(sql: String, bindings: [SQLValue])] = []
    /// The first error read (the server skips everything after it).
    package private(set) var error: DatabaseError?
    private var commitTag: String?
    private var publicationFailed = false

    package init() {}

    package mutating func sent(_ command: Command) { unread.append(command) }

    package mutating func hold(_ sql: String, _ bindings: [SQLValue]) { held.append((sql, bindings)) }

    /// The held statements, to be sent now: their answers are awaited from here on.
    package mutating func takeHeld() -> [(sql: String, bindings: [SQLValue])] {
        defer { held.removeAll(keepingCapacity: true) }
        return held
    }

    /// Whether a sync point must follow before the unread answers come (the server holds them
    /// in a pipeline until one).
    package var needsSync: Bool { unread.last.map { $0 != .sync } ?? false }

    /// The commands whose answers are read next, in order; none are unread afterwards.
    package mutating func takeUnread() -> [Command] {
        defer { unread.removeAll(keepingCapacity: true) }
        return unread
    }

    /// Something failed outside an answer (a send, a lost sync): kept unless an earlier error was.
    package mutating func fail(_ error: DatabaseError) {
        if self.error == nil { self.error = error }
    }

    /// The server answered `command`.
    package mutating func read(_ command: Command, _ answer: Answer) -> FollowUp {
        switch (command, answer) {
        case (.statement, .done(_, let changes)): return .changes(changes)
        case (.commit, .done(let tag, _)):
            commitTag = tag
            return .none
        case (_, .done): return .none
        case (.publication, .failed):
            publicationFailed = true
            return .none
        case (.prepare(let sql), .failed(let error)):
            fail(error)
            return .forgetPrepared(sql: sql)
        case (.statement, .failed(let error)), (.commit, .failed(let error)), (.sync, .failed(let error)):
            fail(error)
            return .none
        }
    }

    /// How the commit ended (after every answer up to the last sync point was read).
    package var outcome: Outcome {
        if let error { return .failed(error) }
        guard commitTag == "COMMIT" else { return .rolledBack }
        return .committed(publicationFailed: publicationFailed)
    }
}
