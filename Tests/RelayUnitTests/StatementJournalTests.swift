import Foundation
import RelayCore
import RelayLocks
import RelayLog
import RelayStore
import Testing

/// SQLite's message log (`StatementJournal`): a group acknowledged from the log and missing from
/// the database is run again when the store opens; a log that does not follow the database is
/// refused; a read sees every acknowledged write however far the database's commit lags.
@Suite struct StatementJournalTests {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString).sqlite").path

    /// A store opened and closed (clean: its log is empty), and its log's id and last record.
    func closedStore() throws -> (logId: String, lsn: UInt64) {
        try SQLStore(database: path).close()
        var meta: [String: String] = [:]
        try SQLiteConnection(path: path, readOnly: true).scan("SELECT key, value FROM meta", []) {
            meta[$0.text(0)] = $0.text(1)
            return true
        }
        let size = (try FileManager.default.attributesOfItem(atPath: path + "-log")[.size] as? Int) ?? -1
        #expect(size == 0, "a clean close leaves the log empty")
        return (meta["log_id"] ?? "", UInt64(meta["log_lsn"] ?? "") ?? 0)
    }

    /// Appends records as a crashed writer would have left them: synced, never committed.
    func leaveInLog(_ records: [(logId: String, lsn: UInt64, sql: String)]) throws {
        var numbers: [String: UInt32] = [:]
        let log = try MessageLog(path: path + "-log")
        try log.append(
            records.map {
                JournalRecord.encode(
                    logId: $0.logId, lsn: $0.lsn, [RecordedStatement(sql: $0.sql, bindings: [.text("v\($0.lsn)")])],
                    numbers: &numbers)
            })
    }

    func probes() throws -> [String] {
        var values: [String] = []
        try SQLiteConnection(path: path, readOnly: true).scan(
            "SELECT value FROM meta WHERE key LIKE 'probe%' ORDER BY key", []
        ) {
            values.append($0.text(0))
            return true
        }
        return values
    }

    static let probe = "INSERT INTO meta(key, value) VALUES ('probe' || ?1, ?1)"

    @Test func groupsTheDatabaseMissesRunAgainAtOpening() throws {
        let (logId, lsn) = try closedStore()
        // One record the database holds already (skipped), two it lacks (run, in order).
        try leaveInLog([(logId, lsn, Self.probe), (logId, lsn + 1, Self.probe), (logId, lsn + 2, Self.probe)])
        let store = try SQLStore(database: path)
        #expect(store.replayedFromLog == 2)
        store.close()
        #expect(try probes() == ["v\(lsn + 1)", "v\(lsn + 2)"])
        // Run once: the next opening has nothing to do.
        let again = try SQLStore(database: path)
        #expect(again.replayedFromLog == 0)
        again.close()
        #expect(try probes().count == 2)
    }

    @Test func aLogOfAnotherDatabaseIsRefused() throws {
        let (_, lsn) = try closedStore()
        try leaveInLog([("0123456789abcdef", lsn + 1, Self.probe)])
        #expect(throws: StoreError.self) { try SQLStore(database: path) }
        #expect(try probes().isEmpty)
    }

    @Test func aMissingRecordIsRefused() throws {
        let (logId, lsn) = try closedStore()
        try leaveInLog([(logId, lsn + 2, Self.probe)])
        #expect(throws: StoreError.self) { try SQLStore(database: path) }
        #expect(try probes().isEmpty)
    }

    @Test func recordsRoundTripWithEachTextWrittenOnce() throws {
        var numbers: [String: UInt32] = [:]
        let statements = [
            RecordedStatement(sql: "UPDATE a SET b = ?", bindings: [.int(-7), .null, .text("é"), .blob([0, 255])]),
            RecordedStatement(sql: "UPDATE a SET b = ?", bindings: []),
        ]
        let first = JournalRecord.encode(logId: "id", lsn: 9, statements, numbers: &numbers)
        let second = JournalRecord.encode(logId: "id", lsn: 10, statements, numbers: &numbers)
        #expect(second.count < first.count, "the second record refers to the text by number")
        var texts: [UInt32: String] = [:]
        let decoded = try JournalRecord.decode(first, texts: &texts)
        let next = try JournalRecord.decode(second, texts: &texts)
        #expect(decoded.logId == "id" && decoded.lsn == 9 && next.lsn == 10)
        #expect(next.statements.map(\.sql) == statements.map(\.sql))
        #expect("\(next.statements[0].bindings)" == "\(statements[0].bindings)")
        // Cut anywhere, a record is refused or reads as fewer whole statements, never misread
        // (the log's checksums keep cut records from being read at all).
        for cut in 1..<first.count {
            var fresh: [UInt32: String] = [:]
            if let prefix = try? JournalRecord.decode(Array(first[..<cut]), texts: &fresh) {
                #expect(prefix.statements.count < statements.count, "cut at \(cut)")
                #expect(prefix.statements.allSatisfy { $0.sql == statements[0].sql })
            }
        }
    }

    /// Many writers at once (the writer's transaction then spans groups, committed later): each
    /// message is read back from the completion that acknowledged it. A read that gives up
    /// waiting for the commit (503, after 2 s: a sanitized build on a busy machine) shows nothing
    /// less than was acknowledged, and is read again.
    @Test func aReadSeesEveryAcknowledgedWrite() async throws {
        let store = try SQLStore(database: path)
        defer { store.close() }
        let missed = LockedValue(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<400 {
                group.addTask {
                    let body = #"{"id":"r\#(n)","recipients":["u\#(n % 7)"],"payload":{}}"#
                    let json = try JSONParser.parse(Array(body.utf8))
                    let new = NewMessage(
                        message: try IncomingMessage(json: json, maxPayloadBytes: 1024, defaultTTLSeconds: 60),
                        fingerprint: [UInt8(n % 256)], now: Timestamp(milliseconds: 1_000))
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                        store.accept(new) { result in
                            func read(_ seq: Int64) -> CatchUpPage? {
                                for _ in 0..<5 {
                                    do throws(StoreError) {
                                        return try store.catchUp(
                                            userId: "u\(n % 7)", after: seq - 1, epoch: nil, limit: 1, maxBytes: 1 << 20
                                        )
                                    } catch {
                                        guard case .unavailable(.journal(.behind)) = error else { return nil }
                                    }
                                }
                                return nil
                            }
                            guard case .success(.accepted(let seqs)) = result, let seq = seqs.first?.seq,
                                let page = read(seq), page.messages.first?.id == "r\(n)"
                            else {
                                missed.withLock { $0 += 1 }
                                return continuation.resume()
                            }
                            continuation.resume()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(missed.withLock { $0 } == 0)
    }
}

extension StatementJournalTests {
    /// The log stays near its limit however much is written: whenever no transaction spans the
    /// moment, the database is made durable and the log emptied; nothing is lost by it.
    @Test func theLogIsEmptiedPastItsLimit() async throws {
        let limit = 4096
        let store = try SQLStore(path: path, logLimit: limit)
        var largest = 0
        for n in 0..<200 {
            let body = #"{"id":"e\#(n)","recipients":["u"],"payload":{"n":\#(n)}}"#
            let new = NewMessage(
                message: try IncomingMessage(
                    json: try JSONParser.parse(Array(body.utf8)), maxPayloadBytes: 1024, defaultTTLSeconds: 60),
                fingerprint: [UInt8(n % 256)], now: Timestamp(milliseconds: 1_000))
            _ = try await withCheckedThrowingContinuation { continuation in
                store.accept(new) { continuation.resume(with: $0) }
            }
            let size = (try FileManager.default.attributesOfItem(atPath: path + "-log")[.size] as? Int) ?? 0
            largest = max(largest, size)
            // A read makes the writer commit what it acknowledged: the next group may empty the log.
            if n % 10 == 9 { _ = try store.inboxHead(userId: "u") }
        }
        let page = try store.catchUp(userId: "u", after: 0, epoch: nil, limit: 1000, maxBytes: 1 << 20)
        store.close()
        #expect(page.messages.map(\.seq) == Array(1...200))
        // Ten messages' records (~300 bytes each) may follow the limit before a commit.
        #expect(largest < limit + 10 * 512, "the log reached \(largest) bytes")
    }
}

extension StatementJournalTests {
    /// Under writes that never pause (posters and a reader making the writer commit often), the
    /// write-ahead log is copied into the database beside the writer and still starts over:
    /// it stays near its limit instead of holding everything written.
    @Test func theWriteAheadLogStartsOverUnderSteadyWrites() async throws {
        let schedule = CheckpointSchedule(threshold: 32, limit: 128)
        let store = try SQLStore(path: path, checkpoints: schedule)
        let sizes = LockedValue((largest: 0, written: 0))
        let done = LockedValue(false)
        func walSize() -> Int { (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for poster in 0..<8 {
                group.addTask {
                    for n in 0..<400 {
                        let body = #"{"id":"w\#(poster)-\#(n)","recipients":["u\#(n % 50)"],"payload":{"n":\#(n)}}"#
                        let new = NewMessage(
                            message: try IncomingMessage(
                                json: try JSONParser.parse(Array(body.utf8)), maxPayloadBytes: 1024,
                                defaultTTLSeconds: 60),
                            fingerprint: [UInt8(n % 256)], now: Timestamp(milliseconds: 1_000))
                        _ = try await withCheckedThrowingContinuation { continuation in
                            store.accept(new) { continuation.resume(with: $0) }
                        }
                    }
                }
            }
            group.addTask {
                while !done.withLock({ $0 }) {
                    _ = try store.inboxHead(userId: "u1")
                    let size = walSize()
                    sizes.withLock { $0.largest = max($0.largest, size) }
                    try await Task.sleep(for: .milliseconds(2))
                }
            }
            for _ in 0..<8 { try await group.next() }
            done.withLock { $0 = true }
            try await group.waitForAll()
        }
        let heads = try (0..<50).map { try store.inboxHead(userId: "u\($0)") }
        store.close()
        #expect(heads.reduce(0) { $0 + $1.headSeq } == 3200)
        // A commit's frames may come on top of the limit before the log starts over.
        let largest = sizes.withLock { $0.largest }
        #expect(largest > 0 && largest < 3 * schedule.limit * 4120, "the log reached \(largest) bytes")
    }
}

extension StatementJournalTests {
    /// Messages committed alone wrote a few B-tree pages twice each (44 KB per message at 20 a
    /// second): a slow stream stays in the open transaction until a read asks for it or the
    /// writer has been idle for a while (`StoreWriter.idleCommitMilliseconds`), and a read
    /// sees it all the same.
    @Test func aSlowStreamIsCommittedWhenReadOrIdle() async throws {
        let store = try SQLStore(database: path)
        defer { store.close() }
        func accept(_ id: String) async throws {
            let body = #"{"id":"\#(id)","recipients":["slow"],"payload":{}}"#
            let new = NewMessage(
                message: try IncomingMessage(
                    json: try JSONParser.parse(Array(body.utf8)), maxPayloadBytes: 1024, defaultTTLSeconds: 60),
                fingerprint: [1], now: Timestamp(milliseconds: 1_000))
            _ = try await withCheckedThrowingContinuation { continuation in
                store.accept(new) { continuation.resume(with: $0) }
            }
        }
        /// Straight from the file, past the store: what the database has committed.
        func committed(_ prefix: String) throws -> Int {
            var count = 0
            try SQLiteConnection(path: path, readOnly: true).scan(
                "SELECT count(*) FROM messages WHERE id LIKE ?", [.text(prefix + "%")]
            ) {
                count = Int($0.int64(0))
                return false
            }
            return count
        }
        // Ten messages 150 ms apart (longer together than the idle second), and a look at the
        // file 100 ms after the last: none of them is committed. A machine too busy to keep every step under 900 ms (the writer may then
        // have been idle its second) cannot tell: that round is run again with new messages.
        var prefix = ""
        var looked = false
        for round in 0..<10 where !looked {
            prefix = "a\(round)-"
            // A read first commits what an inconclusive round left (10 s after its first group
            // the transaction would commit in the middle of this one).
            _ = try store.inboxHead(userId: "slow")
            let began = ContinuousClock.now
            try await accept(prefix + "0")
            var acknowledged = ContinuousClock.now
            var longestGap = Duration.zero
            for n in 1..<10 {
                try await Task.sleep(for: .milliseconds(150))
                try await accept(prefix + "\(n)")
                longestGap = max(longestGap, ContinuousClock.now - acknowledged)
                acknowledged = ContinuousClock.now
            }
            try await Task.sleep(for: .milliseconds(100))
            let count = try committed(prefix)
            guard max(longestGap, ContinuousClock.now - acknowledged) < .milliseconds(900),
                ContinuousClock.now - began < .seconds(8)
            else { continue }
            #expect(count == 0, "a slow stream was committed message by message")
            looked = true
        }
        #expect(looked, "no round kept its steps under 900 ms")
        // A read sees every one, by asking for the commit.
        let page = try store.catchUp(userId: "slow", after: 0, epoch: nil, limit: 1000, maxBytes: 1 << 20)
        #expect(page.messages.filter { $0.id.hasPrefix(prefix) }.count == 10)
        #expect(try committed(prefix) == 10)
        // Left alone, the writer commits once idle.
        try await accept("b0")
        let deadline = ContinuousClock.now + .seconds(30)
        while try committed("b") == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try committed("b") == 1)
    }

    @Test func theOpenTransactionCommitsAtItsBounds() {
        #expect(!UncommittedBound.reached(rows: 8191, bytes: (8 << 20) - 1, age: 9_999))
        #expect(UncommittedBound.reached(rows: 8192, bytes: 0, age: 0))
        #expect(UncommittedBound.reached(rows: 1, bytes: 8 << 20, age: 0))
        #expect(UncommittedBound.reached(rows: 1, bytes: 100, age: 10_000))
        // An idle writer: a second after the last group, ten after the first at the latest.
        #expect(UncommittedBound.wait(first: 0, last: 0, now: 0) == 1000)
        #expect(UncommittedBound.wait(first: 0, last: 500, now: 900) == 600)
        #expect(UncommittedBound.wait(first: 0, last: 9_500, now: 9_600) == 400)
        #expect(UncommittedBound.wait(first: 0, last: 9_500, now: 12_000) == 0)
    }
}
