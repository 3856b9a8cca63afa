import Foundation
import RelayStore
import RelayTesting
import Testing

/// A graceful stop while a request is still being handled.
@Suite(.serialized) struct ShutdownTests {
    /// A batch whose write waits on a lock another connection holds (an operator's `sqlite3`
    /// shell, a migration on PostgreSQL) outlasts the drain: it is answered 503 `shutting_down`
    /// before the HTTP server stops, and the relay exits 0. (It used to abort in `MHD_stop_daemon`
    /// with the connection still suspended, and the client's connection was cut unanswered.)
    @Test func aRequestOutlastingTheDrainIsAnswered503AndTheRelayExits0() async throws {
        let relay = try RelayProcess(arguments: ["--shutdown-drain-ms", "300"])
        let first = try await relay.request(
            "POST", "/v1/messages", json: ["id": "before", "recipients": ["ivy"], "payload": [:]])
        #expect(first.status == 202)
        // A read makes the relay commit what it acknowledged (its open transaction holds SQLite's
        // write lock until then, up to a second when idle): the lock below is taken at once.
        _ = try await relay.request("GET", "/v1/users/ivy/messages")
        let lock = try WriteLock(database: relay.databasePath)
        let batch = Task {
            try await relay.request(
                "POST", "/v1/messages/batch",
                json: ["messages": [["id": "held", "recipients": ["ivy"], "payload": [:]]]])
        }
        // The batch reaches the writer and waits on the lock (SQLite: up to its 5 s busy
        // timeout; PostgreSQL: until the lock is released) — far longer than the drain. Stopped
        // only once its writer is seen waiting, however long the batch took to get there.
        #expect(await eventually(within: 60) { Self.writerIsWaiting(pid: relay.process.processIdentifier) })
        kill(relay.process.processIdentifier, SIGTERM)
        let answer = try await batch.value
        try lock.release()
        #expect(answer.status == 503, "\(answer.text)")
        #expect(answer.errorCode == "shutting_down")
        relay.process.waitUntilExit()
        #expect(relay.process.terminationReason == .exit, "\(relay.logText)")
        #expect(relay.process.terminationStatus == 0, "\(relay.logText)")
    }

    /// Whether the relay's `relay-writer` thread is blocked in the kernel on something other
    /// than its idle wait (a futex): SQLite's busy handler sleeps, libpq polls its socket.
    static func writerIsWaiting(pid: Int32) -> Bool {
        let tasks = "/proc/\(pid)/task"
        for task in (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? [] {
            let comm = (try? String(contentsOfFile: "\(tasks)/\(task)/comm", encoding: .utf8)) ?? ""
            guard comm.hasPrefix("relay-writer") else { continue }
            // `syscall`: the number of the call it is blocked in, or "running".
            let call = (try? String(contentsOfFile: "\(tasks)/\(task)/syscall", encoding: .utf8)) ?? ""
            guard let number = Int(call.split(separator: " ").first ?? "") else { return false }
            return number != 202  // futex: idle, waiting for work
        }
        return false
    }
}

/// The database's write lock, held by a connection of the test's own, as another program's would be.
private final class WriteLock {
    private let sqlite: SQLiteConnection?
    private let postgres: PostgresConnection?

    init(database: String) throws {
        if database.hasPrefix("postgres") {
            let connection = try PostgresConnection(uri: database)
            try connection.execute("BEGIN; LOCK TABLE messages IN EXCLUSIVE MODE")
            postgres = connection
            sqlite = nil
        } else {
            let connection = try SQLiteConnection(path: database)
            try connection.execute("BEGIN IMMEDIATE")
            sqlite = connection
            postgres = nil
        }
    }

    func release() throws {
        try sqlite?.execute("ROLLBACK")
        try postgres?.execute("ROLLBACK")
    }
}
