import RelayStore
import Testing

/// The pipelined write transaction's state, without a server: what is sent, held and read, and
/// what the answers mean for the commit.
@Suite struct PostgresPipelineTests {
    static func error(_ state: String) -> DatabaseError {
        .postgres(PostgresError(sqlState: state, message: "failed", sql: nil))
    }

    static func state(_ error: DatabaseError?) -> String? {
        guard case .postgres(let error) = error else { return nil }
        return error.sqlState
    }

    /// Statements whose results are not needed wait for the next sync point; taken, they are
    /// sent in order, and their answers are awaited.
    @Test func heldStatementsGoOutInOrderBeforeTheSync() {
        var pipeline = PostgresPipeline()
        #expect(!pipeline.needsSync)
        pipeline.hold("UPDATE a", [])
        pipeline.hold("UPDATE b", [.int(1)])
        #expect(pipeline.unread.isEmpty)
        let held = pipeline.takeHeld()
        #expect(held.map(\.sql) == ["UPDATE a", "UPDATE b"])
        #expect(pipeline.held.isEmpty)
        for (sql, _) in held { pipeline.sent(.statement(sql: sql)) }
        #expect(pipeline.needsSync)
        pipeline.sent(.sync)
        #expect(!pipeline.needsSync)
        #expect(pipeline.takeUnread() == [.statement(sql: "UPDATE a"), .statement(sql: "UPDATE b"), .sync])
        #expect(pipeline.unread.isEmpty)
    }

    /// A statement's row count goes to `changes`; the commit's tag decides the outcome.
    @Test func answersCarryChangesAndTheCommitTag() {
        var pipeline = PostgresPipeline()
        #expect(pipeline.read(.statement(sql: "UPDATE a"), .done(tag: "UPDATE 3", changes: 3)) == .changes(3))
        #expect(pipeline.read(.prepare(sql: "SELECT 1"), .done(tag: "", changes: 0)) == .none)
        #expect(pipeline.read(.commit, .done(tag: "COMMIT", changes: 0)) == .none)
        guard case .committed(publicationFailed: false) = pipeline.outcome else {
            Issue.record("expected a commit, got \(pipeline.outcome)")
            return
        }
        // A transaction that had failed answers COMMIT with ROLLBACK: nothing was stored.
        var failed = PostgresPipeline()
        _ = failed.read(.commit, .done(tag: "ROLLBACK", changes: 0))
        guard case .rolledBack = failed.outcome else {
            Issue.record("expected a rollback, got \(failed.outcome)")
            return
        }
    }

    /// The server skips everything after the first error, so that one is what the commit reports.
    @Test func theFirstErrorIsKept() {
        var pipeline = PostgresPipeline()
        _ = pipeline.read(.statement(sql: "INSERT a"), .failed(Self.error("23505")))
        _ = pipeline.read(.statement(sql: "INSERT b"), .failed(Self.error("25P02")))
        pipeline.fail(Self.error(""))
        _ = pipeline.read(.commit, .done(tag: "ROLLBACK", changes: 0))
        #expect(Self.state(pipeline.error) == "23505")
        guard case .failed(let error) = pipeline.outcome else {
            Issue.record("expected the first error, got \(pipeline.outcome)")
            return
        }
        #expect(Self.state(error) == "23505")
    }

    /// A statement that could not be prepared does not exist in the session: it is forgotten.
    @Test func aFailedPrepareIsForgotten() {
        var pipeline = PostgresPipeline()
        #expect(
            pipeline.read(.prepare(sql: "SELECT x"), .failed(Self.error("42703"))) == .forgetPrepared(sql: "SELECT x"))
        #expect(Self.state(pipeline.error) == "42703")
    }

    /// The notes' publication failing is only noted: the write transaction committed all the same.
    @Test func aFailedPublicationLeavesTheCommit() {
        var pipeline = PostgresPipeline()
        _ = pipeline.read(.commit, .done(tag: "COMMIT", changes: 0))
        _ = pipeline.read(.publication(sql: "SELECT pg_notify($1, $2)"), .failed(Self.error("54000")))
        #expect(pipeline.error == nil)
        guard case .committed(publicationFailed: true) = pipeline.outcome else {
            Issue.record("expected a commit with its publication failed, got \(pipeline.outcome)")
            return
        }
    }
}
