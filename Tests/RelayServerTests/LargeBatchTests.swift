import Foundation
import RelayStore
import RelayTesting
import Testing

/// Batches of 1,000-recipient messages against the real binary: they are stored in bounded
/// transactions, so the writer keeps serving everyone else meanwhile, and a batch cut short by a
/// crash converges when it is posted again.
@Suite struct LargeBatchTests {
    /// `POST /v1/messages/batch` of `count` messages to the same 1,000 users, ids `prefix-0` ….
    static func postBatch(_ relay: RelayProcess, _ prefix: String, count: Int) async throws -> RelayProcess.Response {
        let users = (0..<1000).map { "\"u\($0)\"" }.joined(separator: ",")
        let items = (0..<count).map { #"{"id":"\#(prefix)-\#($0)","recipients":[\#(users)],"payload":{"n":\#($0)}}"# }
        let body = Data(#"{"messages":[\#(items.joined(separator: ","))]}"#.utf8)
        return try await relay.request(
            "POST", "/v1/messages/batch", rawBody: body, headers: ["Content-Type": "application/json"], timeout: 600)
    }

    /// Two batches of 60,000 inbox rows each are posted at once; while they are stored, a single
    /// post and `/readyz` are sent every 100 ms. Neither may wait for a batch: at least three of
    /// each are answered before the batches are. Before, the writer took a batch as one write,
    /// and a single post queued behind both waited for all of them (and `/readyz`, a write too,
    /// as long): none was answered first. (Counted, not timed: under the thread sanitizer on a
    /// busy machine a single post once took 4.4 s of the batches' 14.5 s, and a ratio failed.)
    @Test func aBystanderIsAnsweredWhileLargeBatchesAreStored() async throws {
        let relay = try RelayProcess()
        let started = ContinuousClock.now
        let done = Finished()
        let batches = Task {
            let longest = try await withThrowingTaskGroup(of: Duration.self) { group in
                for poster in 0..<2 {
                    group.addTask {
                        let response = try await Self.postBatch(relay, "p\(poster)", count: 60)
                        #expect(response.status == 200)
                        let results = response.object["results"] as? [[String: Any]] ?? []
                        #expect(results.count == 60 && results.allSatisfy { $0["status"] as? Int == 202 })
                        return ContinuousClock.now - started
                    }
                }
                return try await group.reduce(Duration.zero) { max($0, $1) }
            }
            await done.set()
            return longest
        }
        try await Task.sleep(for: .milliseconds(500))  // the batches are being read and stored
        var single = Duration.zero
        var ready = Duration.zero
        var probes = 0
        var answeredFirst = 0
        while ContinuousClock.now - started < .seconds(120) {
            let clock = ContinuousClock.now
            let posted = try await relay.request(
                "POST", "/v1/messages", json: ["id": "lone-\(probes)", "recipients": ["bystander"], "payload": [:]])
            #expect(posted.status == 202)
            single = max(single, ContinuousClock.now - clock)
            let readyClock = ContinuousClock.now
            #expect(try await relay.request("GET", "/readyz", token: nil).status == 200)
            ready = max(ready, ContinuousClock.now - readyClock)
            probes += 1
            if await done.value { break }
            answeredFirst += 1
            try await Task.sleep(for: .milliseconds(100))
        }
        let longest = try await batches.value
        #expect(
            answeredFirst >= 3,
            """
            \(answeredFirst) of \(probes) single posts and /readyz answered before the batches (\(longest)); \
            longest waits \(single) and \(ready)
            """)
    }

    /// `kill -9` in the middle of one batch: its first messages are stored, the rest not, and
    /// nobody was answered. Posted again, the batch converges: the stored messages are answered
    /// as replays with the recipients and seqs they were stored with, the others are accepted,
    /// and every user's inbox holds each message once, seqs 1…40 without a gap.
    /// (`WriterStall` holds the transaction storing `cut-2` open until the kill, so the cut falls
    /// in the same place however busy the machine is.)
    @Test func aBatchCutShortByACrashConvergesWhenPostedAgain() async throws {
        let relay = try RelayProcess()
        let stall = WriterStall(database: relay.databasePath, messageId: "cut-2")
        try stall.install()
        let first = Task { try? await Self.postBatch(relay, "cut", count: 40) }
        var stored: [String: Any]?
        for _ in 0..<12000 where stored == nil {
            let probe = try await relay.request("GET", "/v1/messages/cut-0")
            if probe.status == 200 { stored = probe.object } else { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(stored != nil, "the batch's first piece was never stored")
        #expect(try await relay.request("GET", "/v1/messages/cut-2").status == 404)
        relay.crash()
        let answered = await first.value
        #expect(answered == nil, "the batch was answered before the crash")
        try stall.remove()
        try relay.restart()

        let again = try await Self.postBatch(relay, "cut", count: 40)
        #expect(again.status == 200)
        let results = again.object["results"] as? [[String: Any]] ?? []
        let statuses = results.map { $0["status"] as? Int ?? 0 }
        #expect(statuses.count == 40 && statuses.allSatisfy { $0 == 200 || $0 == 202 })
        #expect(statuses.first == 200, "the message stored before the crash is a replay")
        #expect(statuses.dropFirst(2).allSatisfy { $0 == 202 }, "only the first piece was stored before the crash")
        // A replay answers what was stored the first time.
        let storedSeqs = (stored?["recipients"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int }
        let replayedSeqs = (results.first?["recipients"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int }
        #expect(storedSeqs != nil && storedSeqs == replayedSeqs)
        for user in ["u0", "u999"] {
            let token = try await relay.token(userId: user)
            let page = try await relay.request("GET", "/v1/users/\(user)/messages?limit=1000", token: token)
            let messages = page.object["messages"] as? [[String: Any]] ?? []
            #expect(messages.compactMap { $0["seq"] as? Int } == Array(1...40))
            #expect(Set(messages.compactMap { $0["id"] as? String }) == Set((0..<40).map { "cut-\($0)" }))
        }
    }
}

/// Holds the writer inside the transaction that stores one message until the relay is killed:
/// a trigger on that message's insert that never ends (SQLite: a four-way cross join of the
/// inbox, ≥ 10¹² rows; PostgreSQL: an hour's `pg_sleep`). `remove()` after the kill drops it
/// (and, on PostgreSQL, ends the dead relay's backend, which would hold its locks meanwhile).
private struct WriterStall {
    let database: String
    let messageId: String

    func install() throws {
        if database.hasPrefix("postgresql:") {
            try PostgresConnection(uri: database).execute(
                """
                CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS
                    $$ BEGIN PERFORM pg_sleep(3600); RETURN NEW; END $$;
                CREATE TRIGGER test_stall BEFORE INSERT ON messages FOR EACH ROW
                    WHEN (NEW.id = '\(messageId)') EXECUTE FUNCTION test_stall();
                """)
        } else {
            try SQLiteConnection(path: database).execute(
                """
                CREATE TRIGGER test_stall BEFORE INSERT ON messages WHEN NEW.id = '\(messageId)' BEGIN
                    SELECT count(*) FROM inbox_entries a, inbox_entries b, inbox_entries c, inbox_entries d;
                END
                """)
        }
    }

    func remove() throws {
        if database.hasPrefix("postgresql:") {
            try PostgresConnection(uri: database).execute(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid();
                DROP TRIGGER test_stall ON messages;
                DROP FUNCTION test_stall();
                """)
        } else {
            try SQLiteConnection(path: database).execute("DROP TRIGGER test_stall")
        }
    }
}

/// Set once the batches are answered.
private actor Finished {
    private(set) var value = false
    func set() { value = true }
}
