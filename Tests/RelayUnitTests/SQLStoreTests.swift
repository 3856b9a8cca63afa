import Foundation
import RelayCore
import RelayLocks
import RelayStore
import RelayTesting
import Testing

extension SQLStore {
    /// A message without live delivery (what most tests need).
    func accept(_ new: NewMessage, completion: @escaping @Sendable (Result<AcceptOutcome, StoreError>) -> Void) {
        accept(new, durable: { _ in }, completion: completion)
    }
}

/// The store on SQLite, and on PostgreSQL when `PUSHRELAY_TEST_POSTGRES` names the socket
/// directory of a test PostgreSQL (`make test-postgres`).
@Suite struct SQLStoreTests: Sendable {
    let path: String

    init() throws {
        path = try RelayProcess.freshDatabase(
            in: FileManager.default.temporaryDirectory, name: "store-\(UUID().uuidString)")
    }

    /// `store` once it is the delivering node (on PostgreSQL it takes the delivery lease on a
    /// thread of its own, just after opening; until then it reads no due jobs and prunes nothing).
    /// Waited for up to a minute: seconds on a busy machine.
    static func delivering(_ store: SQLStore) -> SQLStore {
        let deadline = Date().addingTimeInterval(60)
        while !store.delivers, Date() < deadline { usleep(10_000) }
        return store
    }

    func open() throws -> SQLStore {
        try Self.delivering(SQLStore(database: path))
    }

    func message(_ id: String, _ recipients: [String], text: String = "x") throws -> NewMessage {
        let json = try JSONParser.parse(
            Array(
                #"{"id":"\#(id)","recipients":[\#(recipients.map { "\"\($0)\"" }.joined(separator: ","))],"payload":{"t":"\#(text)"}}"#
                    .utf8))
        let incoming = try IncomingMessage(json: json, maxPayloadBytes: 65536, defaultTTLSeconds: 3600)
        return NewMessage(message: incoming, fingerprint: Array(text.utf8), now: Timestamp(milliseconds: 1_000_000))
    }

    static func accept(_ store: SQLStore, _ new: NewMessage) async throws -> AcceptOutcome {
        try await withCheckedThrowingContinuation { continuation in
            store.accept(new) { continuation.resume(with: $0) }
        }
    }

    /// A retention pass wakes nobody (it is re-armed by writes, and would otherwise re-arm
    /// itself forever); a message's commit wakes retention, and the notifier only when a
    /// recipient has a device (only then can a push job exist); any other write wakes both.
    @Test func commitsTellWhomTheyConcern() async throws {
        let batches = Batches()
        let store = try Self.delivering(
            SQLStore(database: path, onBatch: { batches.append($0) }))
        defer { store.close() }
        batches.removeAll()  // opening wrote the database's epoch key
        let policy = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
        var new = try message("m1", ["u"])
        new.delivery = policy
        _ = try await Self.accept(store, new)
        _ = try await withCheckedThrowingContinuation { continuation in
            store.putDevice(
                Device(
                    userId: "u", deviceId: "phone", target: "http://127.0.0.1:9/p", platform: nil,
                    contentFree: false, createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            ) { continuation.resume(with: $0) }
        }
        new = try message("m2", ["u", "nobody"])
        new.delivery = policy
        _ = try await Self.accept(store, new)
        let _: PruneResult = try await withCheckedThrowingContinuation { continuation in
            store.prune(now: Timestamp(milliseconds: 2_000_000), retentionSeconds: 0) { continuation.resume(with: $0) }
        }
        #expect(batches.all.map(\.effect) == [.data, .jobs, .jobs, .maintenance])
    }

    final class Batches: Sendable {
        private let batches = LockedValue<[CommittedBatch]>([])
        func append(_ batch: CommittedBatch) { batches.withLock { $0.append(batch) } }
        var all: [CommittedBatch] { batches.withLock { $0 } }
        func removeAll() { batches.withLock { $0.removeAll() } }
    }

    @Test func concurrentAcceptsGetGaplessSeqs() async throws {
        let store = try open()
        defer { store.close() }
        let seqs = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for worker in 0..<8 {
                let batch = try (0..<50).map { try message("w\(worker)-\($0)", ["u"]) }
                group.addTask {
                    var mine: [Int64] = []
                    for new in batch {
                        guard case .accepted(let recipients) = try await Self.accept(store, new) else {
                            throw CancellationError()
                        }
                        mine.append(recipients[0].seq)
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(seqs.sorted() == Array(1...400))
        let page = try store.catchUp(userId: "u", after: 0, epoch: nil, limit: 1000, maxBytes: 1 << 20)
        #expect(page.messages.map(\.seq) == Array(1...400))
        #expect(page.head.headSeq == 400)
        #expect(page.window.complete)
    }

    /// Completions run in commit order whether a write was committed by the writer thread (in
    /// a group) or by its caller leading it alone (the 202s go out in that order). Eight threads
    /// accept for one user; the completions must see its seqs 1, 2, 3, … in that order.
    @Test func completionsKeepCommitOrderWithLeadingCallers() throws {
        let store = try open()
        defer { store.close() }
        let order = LockedValue<[Int64]>([])
        let messages = try (0..<8).map { worker in try (0..<100).map { try message("o\(worker)-\($0)", ["u"]) } }
        let threads = messages.map { batch in
            Thread {
                for new in batch {
                    let done = LockedValue(false)
                    store.accept(new) { result in
                        if case .success(.accepted(let recipients)) = result {
                            order.withLock { $0.append(recipients[0].seq) }
                            order.broadcast()
                        }
                        done.withLock { $0 = true }
                        done.signal()
                    }
                    done.withLock(when: { $0 }) { _ in }
                }
            }
        }
        for thread in threads { thread.start() }
        let finished = order.withLock(when: { $0.count == 800 }, waitingAtMost: 60_000) { $0 }
        #expect(finished == Array(1...800))
    }

    /// A message's `durable` (live delivery) runs on the thread that saw its group's sync return
    /// — the writer's, or the caller's that led its write alone —, never on the completion queue,
    /// in commit order, and before the message's completion. Eight threads accept for one user.
    @Test func durableRunsWhereTheSyncReturnedBeforeTheCompletion() throws {
        let store = try open()
        defer { store.close() }
        let order = LockedValue<[Int64]>([])
        let elsewhere = LockedValue<Set<String>>([])
        let completedFirst = LockedValue(0)
        let messages = try (0..<8).map { worker in try (0..<100).map { try message("t\(worker)-\($0)", ["u"]) } }
        let threads = messages.map { batch in
            Thread {
                let poster = pthread_self()
                for new in batch {
                    let done = LockedValue(false)
                    let durable = LockedValue(false)
                    store.accept(
                        new,
                        durable: { outcome in
                            let thread = Self.threadName()
                            if thread != "relay-writer", pthread_equal(pthread_self(), poster) == 0 {
                                elsewhere.withLock { _ = $0.insert(thread) }
                            }
                            if case .accepted(let recipients) = outcome {
                                order.withLock { $0.append(recipients[0].seq) }
                            }
                            durable.withLock { $0 = true }
                        },
                        completion: { _ in
                            if !durable.withLock({ $0 }) { completedFirst.withLock { $0 += 1 } }
                            done.withLock { $0 = true }
                            done.signal()
                        })
                    done.withLock(when: { $0 }) { _ in }
                }
            }
        }
        for thread in threads { thread.start() }
        let deadline = Date().addingTimeInterval(60)
        while order.withLock({ $0.count }) < 800, Date() < deadline { usleep(1000) }
        #expect(order.withLock { $0 } == Array(1...800))
        #expect(elsewhere.withLock { $0 }.isEmpty)
        #expect(completedFirst.withLock { $0 } == 0)
    }

    static func threadName() -> String {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return comm.trimmingCharacters(in: .newlines)
    }

    /// A write submitted from a completion (the Matrix gateway chains an event's messages) is
    /// queued, never led: leading there would wait on its own completion queue forever.
    @Test func writesChainedFromCompletionsDoNotDeadlock() throws {
        let store = try open()
        defer { store.close() }
        let messages = try (0..<50).map { try message("c\($0)", ["u"]) }
        let accepted = LockedValue(0)
        @Sendable func chain(_ index: Int) {
            guard index < messages.count else { return }
            store.accept(messages[index]) { _ in
                accepted.withLock { $0 += 1 }
                accepted.broadcast()
                chain(index + 1)
            }
        }
        chain(0)
        #expect(accepted.withLock(when: { $0 == 50 }, waitingAtMost: 30_000) { $0 } == 50)
    }

    /// A batch is stored in transactions of at most `StoreWriter.maxRows` inbox rows, with other
    /// writes let in between: a single message submitted just after a batch of 30,000 rows is
    /// stored (and completes) long before the batch does. The batch's items complete in order,
    /// each user's seqs are gapless across the pieces, and the batch answers every item.
    @Test func aSingleWriteOvertakesALargeBatch() throws {
        let store = try open()
        defer { store.close() }
        let users = (0..<1000).map { "r\($0)" }
        let batch = try (0..<30).map { try message("big\($0)", users) }
        let events = LockedValue<[String]>([])
        let committedItems = LockedValue<[Int]>([])
        store.acceptBatch(
            batch, committed: { index, _ in committedItems.withLock { $0.append(index) } },
            completion: { result in
                events.withLock { $0.append((try? result.get().count).map { "batch \($0)" } ?? "batch failed") }
                events.broadcast()
            })
        store.accept(try message("lone", ["r0", "someone"])) { result in
            events.withLock { $0.append((try? result.get()) == nil ? "single failed" : "single") }
            events.broadcast()
        }
        let order = events.withLock(when: { $0.count == 2 }, waitingAtMost: 120_000) { $0 }
        #expect(order == ["single", "batch 30"])
        #expect(committedItems.withLock { $0 } == Array(0..<30))
        let head = try store.inboxHead(userId: "r0")
        #expect(head.headSeq == 31)
        let page = try store.catchUp(userId: "r0", after: 0, epoch: nil, limit: 100, maxBytes: 1 << 20)
        #expect(page.messages.map(\.seq) == Array(1...31))
        #expect(page.messages.filter { $0.id == "lone" }.count == 1)
    }

    @Test func idempotentReplayAndConflict() async throws {
        let store = try open()
        defer { store.close() }
        guard case .accepted(let first) = try await Self.accept(store, try message("m", ["a", "b"])) else {
            Issue.record("not accepted")
            return
        }
        guard case .replay(let again) = try await Self.accept(store, try message("m", ["a", "b"])) else {
            Issue.record("not a replay")
            return
        }
        #expect(again == first)
        guard case .conflict = try await Self.accept(store, try message("m", ["a"], text: "other")) else {
            Issue.record("not a conflict")
            return
        }
        // The conflict consumed no seq.
        #expect(try store.inboxHead(userId: "a").headSeq == 1)
    }

    @Test func pagesAndByteBudget() async throws {
        let store = try open()
        defer { store.close() }
        for n in 1...10 { _ = try await Self.accept(store, try message("m\(n)", ["u"])) }
        let epoch = try store.inboxHead(userId: "u").epoch
        let page = try store.catchUp(userId: "u", after: 3, epoch: epoch, limit: 4, maxBytes: 1 << 20)
        #expect(page.messages.map(\.seq) == [4, 5, 6, 7])
        #expect(page.hasMore)
        let small = try store.catchUp(userId: "u", after: 0, epoch: nil, limit: 100, maxBytes: 20)
        #expect(small.messages.count == 3)  // 9-byte payloads: the page stops once 20 bytes are passed
        #expect(small.hasMore)
        let wrongEpoch = try store.catchUp(userId: "u", after: 3, epoch: "stale", limit: 4, maxBytes: 1 << 20)
        #expect(wrongEpoch.messages.isEmpty)
        #expect(!wrongEpoch.window.complete)
    }

    @Test func pruningAckedMessagesMarksTheRangeIncomplete() async throws {
        let store = try open()
        defer { store.close() }
        for n in 1...5 { _ = try await Self.accept(store, try message("m\(n)", ["u"])) }
        let acked: AckOutcome = try await withCheckedThrowingContinuation { continuation in
            store.ack(userId: "u", seq: 3, epoch: nil, now: Timestamp(milliseconds: 1_500_000)) {
                continuation.resume(with: $0)
            }
        }
        #expect(acked == .acknowledged(ackSeq: 3))
        // Retention 0 s at a later time: seqs 1-3 (acked) go; 4-5 stay.
        let pruned: PruneResult = try await withCheckedThrowingContinuation { continuation in
            store.prune(now: Timestamp(milliseconds: 2_000_000), retentionSeconds: 0) { continuation.resume(with: $0) }
        }
        #expect(pruned.removed == 3)
        // What is left expires with its messages (TTL 3600 s from t = 1,000 s).
        #expect(pruned.nextDue == Timestamp(milliseconds: 1_000_000 + 3_600_000))
        let page = try store.catchUp(userId: "u", after: 1, epoch: nil, limit: 100, maxBytes: 1 << 20)
        #expect(!page.window.complete)
        #expect(page.head.prunedSeq == 3)
        #expect(page.messages.map(\.seq) == [4, 5])
        let fromHead = try store.catchUp(userId: "u", after: 3, epoch: nil, limit: 100, maxBytes: 1 << 20)
        #expect(fromHead.window.complete)
    }

    @Test func pruningExpiredMessagesRemovesThemAndTheirRecords() async throws {
        let store = try open()
        defer { store.close() }
        for n in 1...3 { _ = try await Self.accept(store, try message("m\(n)", ["u", "v"])) }
        // TTL is 3600 s from t = 1,000 s: one millisecond past it, everything has expired.
        let pruned: PruneResult = try await withCheckedThrowingContinuation { continuation in
            store.prune(now: Timestamp(milliseconds: 1_000_000 + 3_600_000), retentionSeconds: 1_000_000) {
                continuation.resume(with: $0)
            }
        }
        #expect(pruned.removed == 6)
        #expect(pruned.nextDue == nil)  // nothing left: the next write schedules the next pass
        #expect(try store.message(id: "m2", now: Timestamp(milliseconds: 0)) == nil)
        let page = try store.catchUp(userId: "v", after: 0, epoch: nil, limit: 100, maxBytes: 1 << 20)
        #expect(page.messages.isEmpty)
        #expect(!page.window.complete)
        #expect(page.head.prunedSeq == 3)
        // The seq keeps counting from where it was.
        guard case .accepted(let next) = try await Self.accept(store, try message("m4", ["v"])) else {
            Issue.record("not accepted")
            return
        }
        #expect(next[0].seq == 4)
    }

    /// A transaction larger than one write of SQLite's log and than a message-log record: every
    /// message reads back whole from another connection, and again after the store was closed
    /// (checkpointed) and reopened.
    @Test func aLargeTransactionReadsBackWhole() async throws {
        let texts = (1...300).map { n in
            "\(n)-" + String(repeating: Character(UnicodeScalar(UInt8(97 + n % 26))), count: 20_000)
        }
        let batch = try texts.enumerated().map { try message("big\($0.offset)", ["u"], text: $0.element) }
        func expectAll(_ store: SQLStore) throws {
            let page = try store.catchUp(userId: "u", after: 0, epoch: nil, limit: 1000, maxBytes: 1 << 30)
            #expect(page.messages.map(\.seq) == Array(1...300))
            let payloads = page.messages.map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(payloads == texts.map { #"{"t":"\#($0)"}"# })
        }
        do {
            let store = try open()
            let outcomes = try await withCheckedThrowingContinuation { continuation in
                store.acceptBatch(batch, committed: { _, _ in }) { continuation.resume(with: $0) }
            }
            #expect(outcomes.count == 300)
            try expectAll(store)
            store.close()
        }
        let store = try open()
        defer { store.close() }
        try expectAll(store)
    }

    @Test func survivesReopen() async throws {
        do {
            let store = try open()
            _ = try await Self.accept(store, try message("m1", ["u"]))
            store.close()
        }
        let store = try open()
        defer { store.close() }
        guard case .accepted(let recipients) = try await Self.accept(store, try message("m2", ["u"])) else {
            Issue.record("not accepted")
            return
        }
        #expect(recipients[0].seq == 2)
    }

    /// A push window opens with a device's first pending message: later messages take its due
    /// time, and the one push covers all of them (no timing between posts involved).
    @Test func messagesJoiningAPendingWindowGoOutInOnePush() async throws {
        let store = try open()
        defer { store.close() }
        let device = Device(
            userId: "u", deviceId: "phone", target: "http://127.0.0.1:9/p", platform: nil, contentFree: false,
            createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
        _ = try await withCheckedThrowingContinuation { continuation in
            store.putDevice(device) { continuation.resume(with: $0) }
        }
        for (index, at) in [1_000, 1_100, 1_500].enumerated() {
            var new = try message("w\(index)", ["u"])
            new.now = Timestamp(milliseconds: Int64(at))
            new.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
            _ = try await Self.accept(store, new)
        }
        #expect(
            try store.duePushes(now: Timestamp(milliseconds: 1_599), limit: 10, skipping: [:])
                .isEmpty)
        let batches = try store.duePushes(
            now: Timestamp(milliseconds: 1_600), limit: 10, skipping: [:])
        #expect(batches.count == 1)
        #expect(batches.first?.seqFrom == 1)
        #expect(batches.first?.seqTo == 3)
        #expect(batches.first?.jobIds.count == 3)
    }

    /// Targeted pushes (a Matrix notify per pusher): only the named device gets a job; the same
    /// message named again for another device gives that one its job (once, however often it is
    /// named), marks it content-free when asked, and a fuller version supersedes an ids-only one.
    @Test func targetedPushesReachOnlyTheNamedDevicesOnce() async throws {
        let store = try open()
        defer { store.close() }
        for deviceId in ["phone", "watch", "web"] {
            let device = Device(
                userId: "u", deviceId: deviceId, target: "http://127.0.0.1:9/\(deviceId)", platform: nil,
                contentFree: false, createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            _ = try await withCheckedThrowingContinuation { continuation in
                store.putDevice(device) { continuation.resume(with: $0) }
            }
        }
        let policy = DeliveryPolicy(pushDelayMs: 100, ackTimeoutMs: 5000)
        func targeted(_ text: String, _ deviceId: String, contentFree: Bool, supersedes: [UInt8]?) throws -> NewMessage
        {
            var new = try message("mx_1", ["u"], text: text)
            new.delivery = policy
            new.targets = PushTargets(
                devices: ["u": [deviceId]], contentFree: ["u": contentFree ? [deviceId] : []], supersedes: supersedes)
            return new
        }
        // The ids-only version first (for the watch), then the full one (for the phone), twice each.
        for _ in 0..<2 {
            _ = try await Self.accept(store, try targeted("ids", "watch", contentFree: true, supersedes: nil))
            _ = try await Self.accept(
                store, try targeted("full", "phone", contentFree: false, supersedes: Array("ids".utf8)))
        }
        let batches = try store.duePushes(
            now: Timestamp(milliseconds: 2_000_000), limit: 10, skipping: [:])
        #expect(batches.map(\.deviceId).sorted() == ["phone", "watch"])
        #expect(batches.allSatisfy { $0.jobIds.count == 1 && $0.messageId == "mx_1" })
        #expect(batches.first { $0.deviceId == "watch" }?.contentFree == true)
        #expect(batches.first { $0.deviceId == "phone" }?.contentFree == false)
        let stored = try #require(try store.message(id: "mx_1", now: Timestamp(milliseconds: 1_000_000)))
        #expect(String(decoding: stored.payload, as: UTF8.self) == #"{"t":"full"}"#)
        #expect(stored.recipients.count == 1)
    }

    // MARK: The outbox's counts and the dead-letter list

    /// Waits for a callback-style store call.
    static func wait<T: Sendable>(
        _ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in start { continuation.resume(with: $0) } }
    }

    /// The counters against the rows themselves, state by state.
    static func expectCountsMatchRows(
        _ store: SQLStore, sourceLocation: SourceLocation = #_sourceLocation
    ) throws
        -> [JobState: Int]
    {
        let counts = try store.pushJobCounts()
        for state in JobState.allCases {
            let rows = try store.deliveries(state: state, userId: nil, limit: 1000).count
            #expect(counts[state, default: 0] == rows, "\(state)", sourceLocation: sourceLocation)
        }
        return counts
    }

    /// Both engines' migrations make the one schema `SchemaShape.current` describes (this suite
    /// runs again on PostgreSQL in `make test-postgres`), so that neither list drifts alone.
    /// The delivery trace keeps a device's last 100 attempts, and the retention pass drops those
    /// older than the window (in write order, which is time order give or take an answer's wait).
    @Test func theTraceKeepsTheLastAttemptsOfADeviceForTheWindow() async throws {
        let store = try open()
        defer { store.close() }
        let attempts = (1...130).map { n in
            PushAttempt(
                userId: "u", deviceId: "d", pushId: "p\(n)", kind: .message, seqFrom: 1, seqTo: 1, transport: .fcm,
                app: .default, at: Timestamp(milliseconds: Int64(n) * 1000), latencyMs: 5, status: 503,
                providerId: nil, result: .retried, reason: "attempt \(n)")
        }
        for chunk in stride(from: 0, to: attempts.count, by: 10) {
            store.trace(Array(attempts[chunk..<chunk + 10]), now: Timestamp(milliseconds: 0))
        }
        let other = PushAttempt(
            userId: "u", deviceId: "e", pushId: "q", kind: .message, seqFrom: 1, seqTo: 1, transport: .fcm,
            app: .default, at: Timestamp(milliseconds: 131_000), latencyMs: 5, status: 200, providerId: "id",
            result: .delivered, reason: nil)
        store.trace([other], now: Timestamp(milliseconds: 0))
        try await Self.wait {
            store.recordLastOnline(userId: "barrier", deviceId: "b", at: Timestamp(milliseconds: 1), completion: $0)
        }
        var kept = try store.trace(messageId: "m", userId: "u", seq: 1).attempts
        #expect(kept.filter { $0.deviceId == "d" }.map(\.reason) == (31...130).map { "attempt \($0)" })
        #expect(kept.filter { $0.deviceId == "e" } == [other])
        // The window: retention 60 s at t = 120 s keeps what is newer than t = 60 s.
        _ = try await Self.wait {
            store.prune(now: Timestamp(milliseconds: 120_000), retentionSeconds: 60, completion: $0)
        }
        kept = try store.trace(messageId: "m", userId: "u", seq: 1).attempts
        #expect(kept.map(\.pushId) == (61...130).map { "p\($0)" } + ["q"])
    }

    /// A database of the version before apps and the delivery trace (7: the schema less
    /// `push_attempts`) opens at the newest: its devices belong to `default`, and the trace reads.
    @Test func aDatabaseFromBeforeAppsMigratesItsDevicesToDefault() throws {
        guard !SQLStore.isPostgres(path) else { return }
        try open().close()
        do {  // (closed when it goes out of scope)
            let old = try SQLiteConnection(path: path)
            try old.execute(
                """
                DROP TABLE push_attempts;
                PRAGMA user_version = 7;
                INSERT INTO devices(user_id, device_id, transport, platform, content_free, active, created_at, updated_at)
                VALUES ('u', 'iphone', '{"apns":{"token":"\(String(repeating: "ab", count: 32))"}}', 'ios', 0, 1, 1, 1);
                """)
        }
        let store = try open()
        defer { store.close() }
        let device = try #require(try store.devices(userId: "u").first)
        #expect(device.transport?.app == .default && device.transport?.kind == .apns)
        #expect(try store.schemaShape() == SchemaShape.current)
        #expect(try store.trace(messageId: "m", userId: "u", seq: 1).attempts.isEmpty)
    }

    @Test func theMigrationsMakeTheOneSchema() throws {
        let store = try open()
        defer { store.close() }
        var expected = SchemaShape.current
        if SQLStore.isPostgres(path) { expected.tables.merge(SchemaShape.postgresOnlyTables) { own, _ in own } }
        let found = try store.schemaShape()
        #expect(found == expected, "the migrations made:\n\(found)")
    }

    /// The console's two reads cost what they read, not what the outbox keeps: the counts come
    /// from the counters (no scan of `push_jobs`), and each form of the dead-letter list walks an
    /// index in its order (no sort of every job in the state).
    @Test func statsAndTheDeadLetterListReadThroughIndexes() throws {
        let store = try open()
        defer { store.close() }
        let counts = try store.queryPlan(SQLStore.pushJobCountsSQL).joined(separator: "\n")
        #expect(!counts.contains("push_jobs"), "\(counts)")
        for (userId, index) in [(nil, "push_jobs_by_state"), ("u", "push_jobs_by_user_state")] {
            let query = SQLStore.deliveriesQuery(state: .dead, userId: userId, limit: 100)
            let plan = try store.queryPlan(query.sql, query.bindings).joined(separator: "\n")
            #expect(plan.contains(index), "\(plan)")
            // SQLite's "USE TEMP B-TREE FOR ORDER BY", PostgreSQL's "Sort".
            #expect(!plan.contains("TEMP B-TREE") && !plan.contains("Sort"), "\(plan)")
        }
    }

    /// The notifier's reads walk the pending jobs' partial index: however many jobs are pending,
    /// a pass reads the due ones (and on SQLite in due order, with no sort). PostgreSQL sorts the
    /// due rows it read by (due_at, id), which its index does not hold.
    @Test func theNotifierReadsDueJobsThroughThePendingIndex() throws {
        let store = try open()
        defer { store.close() }
        for plan in try store.notifierQueryPlans() {
            #expect(plan.contains("_jobs_pending"), "\(plan)")
            #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
        }
        // SQLite (no statistics) looks delivered jobs up by id, never walking every pending job;
        // PostgreSQL's planner chooses by its statistics (on these empty tables, any index).
        let delivered = try store.deliveredQueryPlan()
        if !delivered.hasPrefix("Update on") {
            #expect(delivered.contains("USING INTEGER PRIMARY KEY"), "\(delivered)")
        }
    }

    /// A requeue (the provider never processed the request) leaves the attempts as they were, so the
    /// backoff does not grow, and makes the batch due at the given time with the reason kept.
    @Test func aRequeuedBatchKeepsItsAttempts() async throws {
        let store = try open()
        defer { store.close() }
        let device = Device(
            userId: "u", deviceId: "phone", target: "http://127.0.0.1:9/p", platform: nil, contentFree: false,
            createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
        _ = try await Self.wait { store.putDevice(device, completion: $0) }
        var new = try message("m1", ["u"])
        new.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
        _ = try await Self.accept(store, new)
        let later = Timestamp(milliseconds: 2_000_000)
        func due(_ at: Timestamp) throws -> [PushBatch] {
            try store.duePushes(now: at, limit: 10, skipping: [:])
        }
        var batch = try #require(try due(later).first)
        try await Self.wait {
            store.finish(batch, result: .retry(error: "HTTP 503", at: later.milliseconds), now: later, completion: $0)
        }
        batch = try #require(try due(later).first)
        #expect(batch.attempts == 1)
        let again = Timestamp(milliseconds: 2_000_500)
        try await Self.wait {
            store.finish(
                batch, result: .requeue(reason: "REFUSED_STREAM", at: again.milliseconds), now: later, completion: $0)
        }
        #expect(try due(later).isEmpty)
        let requeued = try #require(try due(again).first)
        #expect(requeued.attempts == 1)
        let record = try #require(try store.deliveries(messageId: "m1").first)
        #expect(record.state == .pending && record.attempts == 1 && record.lastError == "REFUSED_STREAM")
    }

    /// A scheduler pass never reads the jobs it is sending already: the store leaves them out by
    /// id, and the device's other due jobs by its key.
    @Test func theDueScanLeavesOutJobsInFlight() async throws {
        let store = try open()
        defer { store.close() }
        for userId in ["a", "b"] {
            let device = Device(
                userId: userId, deviceId: "phone", target: "http://127.0.0.1:9/p", platform: nil, contentFree: false,
                createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            _ = try await Self.wait { store.putDevice(device, completion: $0) }
        }
        var new = try message("m1", ["a", "b"])
        new.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
        _ = try await Self.accept(store, new)
        let later = Timestamp(milliseconds: 2_000_000)
        let all = try store.duePushes(now: later, limit: 10)
        #expect(all.map(\.userId) == ["a", "b"])
        let sending = try #require(all.first)
        let rest = try store.duePushes(now: later, limit: 10, skipping: [sending.deviceKey: sending.jobIds])
        #expect(rest.map(\.userId) == ["b"])
    }

    /// Outcomes recorded together in one write: delivered jobs (in one statement) and the others,
    /// each with its own effect on the jobs and the inbox entries.
    @Test func outcomesRecordedTogetherEachTakeEffect() async throws {
        let store = try open()
        defer { store.close() }
        for userId in ["a", "b", "c"] {
            let device = Device(
                userId: userId, deviceId: "phone", target: "http://127.0.0.1:9/p", platform: nil, contentFree: false,
                createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            _ = try await Self.wait { store.putDevice(device, completion: $0) }
        }
        var new = try message("m1", ["a", "b", "c"])
        new.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
        _ = try await Self.accept(store, new)
        let later = Timestamp(milliseconds: 2_000_000)
        let batches = try store.duePushes(now: later, limit: 10)
        #expect(batches.count == 3)
        let outcomes = batches.map { batch -> (batch: PushBatch, result: DeliveryPolicy.Verdict) in
            (batch, batch.userId == "c" ? .retry(error: "HTTP 503", at: 3_000_000) : .delivered)
        }
        #expect(try await Self.wait { store.finish(outcomes, now: later, completion: $0) }.isEmpty)
        let states = try store.deliveries(messageId: "m1").map { ($0.userId, $0.state, $0.attempts) }
        #expect(states.map(\.0) == ["a", "b", "c"])
        #expect(states.map(\.1) == [.delivered, .delivered, .pending])
        #expect(states.allSatisfy { $0.2 == 1 })
        #expect(try store.duePushes(now: later, limit: 10).isEmpty)
        #expect(try Self.expectCountsMatchRows(store)[.delivered] == 2)
    }

    /// The counters follow every way a push job changes state or goes away, survive a restart,
    /// and match the rows at each step.
    @Test func pushJobCountsFollowEveryTransition() async throws {
        var store = try open()
        defer { store.close() }
        for deviceId in ["phone", "tablet"] {
            let device = Device(
                userId: "u", deviceId: deviceId, target: "http://127.0.0.1:9/p", platform: nil, contentFree: false,
                createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            _ = try await Self.wait { store.putDevice(device, completion: $0) }
        }
        var first = try message("m1", ["u"])
        first.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
        _ = try await Self.accept(store, first)
        #expect(try Self.expectCountsMatchRows(store)[.pending] == 2)

        let later = Timestamp(milliseconds: 2_000_000)
        let batches = try store.duePushes(now: later, limit: 10, skipping: [:])
        #expect(batches.count == 2)
        for batch in batches {
            let result: DeliveryPolicy.Verdict = batch.deviceId == "phone" ? .delivered : .dead(error: "HTTP 500")
            try await Self.wait { store.finish(batch, result: result, now: later, completion: $0) }
        }
        var counts = try Self.expectCountsMatchRows(store)
        #expect(counts[.pending, default: 0] == 0 && counts[.delivered] == 1 && counts[.dead] == 1)

        let dead = try #require(try store.deliveries(state: .dead, userId: "u", limit: 10).first)
        _ = try await Self.wait {
            store.retryDelivery(id: dead.id, now: later, expiresAt: Timestamp(milliseconds: 9_000_000), completion: $0)
        }
        counts = try Self.expectCountsMatchRows(store)
        #expect(counts[.pending] == 1 && counts[.dead, default: 0] == 0)

        _ = try await Self.wait { store.deleteDevice(userId: "u", deviceId: "tablet", at: later, completion: $0) }
        counts = try Self.expectCountsMatchRows(store)
        #expect(counts[.pending, default: 0] == 0 && counts[.cancelled] == 1 && counts[.delivered] == 1)

        store.close()
        store = try open()
        #expect(try Self.expectCountsMatchRows(store) == counts)

        _ = try await Self.wait {
            store.prune(now: Timestamp(milliseconds: 10_000_000), retentionSeconds: 1, completion: $0)
        }
        counts = try Self.expectCountsMatchRows(store)
        #expect(counts.values.allSatisfy { $0 == 0 })
    }

    /// Each way a pending push is cancelled ends the jobs it names and no others: a message with
    /// a collapse key its key's earlier jobs on each device, a new `clear` the device's pending
    /// one, an ack every device's message jobs up to it, a gone device all of its own.
    @Test func eachCancelEndsOnlyTheJobsItNames() async throws {
        let store = try open()
        defer { store.close() }
        for deviceId in ["phone", "tablet"] {
            let device = Device(
                userId: "u", deviceId: deviceId, target: "http://127.0.0.1:9/\(deviceId)", platform: nil,
                contentFree: false, createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0))
            _ = try await Self.wait { store.putDevice(device, completion: $0) }
        }
        for (id, collapseKey) in [("m1", "k"), ("m2", "k"), ("m3", nil)] {
            var new = try message(id, ["u"])
            new.message.collapseKey = collapseKey
            new.delivery = DeliveryPolicy(pushDelayMs: 600, ackTimeoutMs: 5000)
            _ = try await Self.accept(store, new)
        }
        let now = Timestamp(milliseconds: 1_000_100)
        for badge: Int64 in [5, 4] {
            try await Self.wait {
                store.queueBadge(userId: "u", deviceId: "phone", badge: badge, now: now, completion: $0)
            }
        }
        _ = try await Self.wait { store.ack(userId: "u", seq: 2, epoch: nil, now: now, completion: $0) }
        let later = Timestamp(milliseconds: 2_000_000)
        let tablet = try #require(
            try store.duePushes(now: later, limit: 10, skipping: [:])
                .first { $0.deviceId == "tablet" })
        try await Self.wait { store.finish(tablet, result: .deviceGone(reason: "gone"), now: later, completion: $0) }

        func jobs(_ state: JobState) throws -> [String] {
            try store.deliveries(state: state, userId: "u", limit: 100)
                .map { "\($0.deviceId) \($0.messageId ?? $0.kind.rawValue) \($0.lastError ?? "-")" }.sorted()
        }
        #expect(try jobs(.pending) == ["phone clear -", "phone m3 -"])
        #expect(
            try jobs(.cancelled) == [
                "phone clear superseded", "phone m1 collapsed", "phone m2 acked", "tablet m1 collapsed",
                "tablet m2 acked", "tablet m3 gone",
            ])
    }
}
