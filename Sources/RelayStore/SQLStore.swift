import Dispatch
import Glibc
package import RelayCore
import RelayLocks

/// The store, on SQLite (embedded, one node) or on PostgreSQL (any number of nodes sharing one
/// database): the same statements on either (see `SQLConnection`), one writer thread per node
/// with group commit, a pool of readers.
package final class SQLStore: RelayStore {
    /// One writer on either engine. On PostgreSQL a batch costs three round trips however large
    /// it is (begin; lock and read ahead; commit and publish), so one writer with large batches
    /// beat four with small ones: 24k against 11k messages/s on the same box (`BENCHMARKS.md`).
    let writer: StoreWriter
    private let readers: ReaderPool
    /// The epoch a user's inbox gets when it is created (`InboxEpochs`, keyed by this database).
    private let epochFor: @Sendable (String) -> String
    /// Told about writes nobody waits for (fire-and-forget) that failed, so none is lost silently.
    private let onFailure: @Sendable (_ write: String, _ error: StoreError) -> Void
    /// The other nodes (PostgreSQL); nil on SQLite, where this node is the only one.
    private let cluster: PostgresCluster?

    /// Whether `database` names a PostgreSQL database (a libpq URI) rather than a SQLite file.
    package static func isPostgres(_ database: String) -> Bool {
        database.hasPrefix("postgresql://") || database.hasPrefix("postgres://")
    }

    /// Opens (creating and migrating) the database `database` names: a `postgresql://` URI, else
    /// the path of a SQLite file.
    /// - Parameters:
    ///   - onBatch: called after each committed transaction.
    ///   - onFailure: called with the name of a fire-and-forget write that failed, and why.
    ///   - nodeLeaseMs: on PostgreSQL, how long a node that stopped running still counts (here:
    ///     keeps the delivery lease, `HeldLease`).
    package convenience init(
        database: String, nodeLeaseMs: Int64 = 15_000,
        onBatch: @escaping @Sendable (CommittedBatch) -> Void = { _ in },
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void = { _, _ in }
    ) throws(StoreError) {
        guard Self.isPostgres(database) else {
            try self.init(path: database, onBatch: onBatch, onFailure: onFailure)
            return
        }
        let epochs = LockedValue(InboxEpochs(key: ""))
        let epochFor: @Sendable (String) -> String = { epochs.withLock { $0 }.epoch(for: $0) }
        let nodeId = RandomID.make(bytes: 8)
        // A node that stops running in the middle of a transaction (stopped, hung, paused) would
        // hold its row locks — every other node's writes to those inboxes — for as long: the
        // server ends such a session after the node lease. Between two statements of a healthy
        // transaction lie microseconds.
        let setup = "SET idle_in_transaction_session_timeout = \(nodeLeaseMs)"
        let writer: StoreWriter
        do {
            let connection = try PostgresConnection(uri: database, setup: setup)
            try PostgresMigrations.apply(to: connection)
            connection.nodeId = nodeId
            writer = StoreWriter(
                connection: connection, onBatch: onBatch,
                lockKeys: { users, db throws(DatabaseError) in try Self.lockInboxes(users, db, epochFor: epochFor) })
        } catch {
            throw .unavailable(error)
        }
        self.init(
            writer: writer,
            readers: ReaderPool { () throws(DatabaseError) in try PostgresConnection(uri: database, setup: setup) },
            cluster: PostgresCluster(uri: database, nodeId: nodeId, leaseMilliseconds: nodeLeaseMs), epochFor: epochFor,
            onFailure: onFailure)
        try loadEpochKey(into: epochs)
    }

    /// Opens (creating and migrating) the SQLite database at `path`.
    package convenience init(
        path: String,
        onBatch: @escaping @Sendable (CommittedBatch) -> Void = { _ in },
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void = { _, _ in }
    ) throws(StoreError) {
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, buffersLog: true)
            try connection.execute("PRAGMA journal_mode = WAL")
            // FULL: a commit is on disk (WAL fsynced) before any 2xx leaves; group commit pays for
            // it. (The buffered log relies on it too.)
            try connection.execute("PRAGMA synchronous = FULL")
            try connection.execute("PRAGMA wal_autocheckpoint = 4000")
            // Savepoint sub-journals in memory, not in temp files (3 pwrites per request otherwise).
            try connection.execute("PRAGMA temp_store = MEMORY")
            try Migrations.apply(to: connection)
        } catch {
            throw .unavailable(error)
        }
        let epochs = LockedValue(InboxEpochs(key: ""))
        self.init(
            writer: StoreWriter(connection: connection, onBatch: onBatch),
            readers: ReaderPool { () throws(DatabaseError) in
                let reader = try SQLiteConnection(path: path, readOnly: true)
                try reader.execute("PRAGMA cache_size = -1024")  // 1 MiB per reader
                return reader
            }, cluster: nil, epochFor: { epochs.withLock { $0 }.epoch(for: $0) }, onFailure: onFailure)
        try loadEpochKey(into: epochs)
    }

    /// Reads the database's epoch key (the first node to open it makes it). Nothing is accepted
    /// before it is in place: the stores' initializers end here.
    private func loadEpochKey(into epochs: LockedValue<InboxEpochs>) throws(StoreError) {
        let key = try secret(named: "epoch_key") { InboxEpochs.newKey() }
        epochs.withLock { $0 = InboxEpochs(key: key) }
    }

    private init(
        writer: StoreWriter, readers: ReaderPool, cluster: PostgresCluster?,
        epochFor: @escaping @Sendable (String) -> String,
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void
    ) {
        self.writer = writer
        self.readers = readers
        self.cluster = cluster
        self.epochFor = epochFor
        self.onFailure = onFailure
        writer.start()
        cluster?.start()
    }

    /// An optimistic pass's locked inbox, with one of its user's active devices (NULL for none).
    enum PrefetchColumn: Int32, SQLColumns {
        case userId, headSeq, deviceId

        var expression: String { self == .deviceId ? "d.device_id" : "l.\(column)" }

        /// Spelled once: it is on every optimistic batch's path.
        static let selected = list
    }

    /// Locks the inbox rows of `users` (sorted) for the transaction, creating the missing ones
    /// (empty) first, in that order: see `StoreWriter.lockKeys`. One upsert does both — its
    /// no-op update locks a row that exists, its insert makes one that does not —, row after
    /// row in the order given, so two transactions creating the same new inboxes cannot wait on
    /// each other in a circle either. In an optimistic pass the same round trip brings back the
    /// head seqs and the active devices of those users (`BatchPrefetch`). (User ids are
    /// `[A-Za-z0-9._:@+=-]` and epochs hex: nothing in them needs escaping in an array literal.)
    static func lockInboxes(_ users: [String], _ db: SQLWrite, epochFor: (String) -> String) throws(DatabaseError) {
        func array(_ items: [String]) -> String { "{" + items.map { "\"" + $0 + "\"" }.joined(separator: ",") + "}" }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let lock = """
            INSERT INTO inboxes(user_id, epoch, head_seq, created_at)
            SELECT user_id, epoch, 0, ? FROM unnest(?::text[], ?::text[]) AS new(user_id, epoch) ORDER BY user_id
            ON CONFLICT(user_id) DO UPDATE SET head_seq = inboxes.head_seq
            """
        let bindings: [SQLValue] = [
            .int(Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec / 1_000_000)), .text(array(users)),
            .text(array(users.map(epochFor))),
        ]
        guard db.isOptimistic else { return try db.run(lock, bindings) }
        var prefetched = BatchPrefetch()
        try db.query(
            """
            WITH locked AS (\(lock) RETURNING user_id, head_seq)
            SELECT \(PrefetchColumn.selected) FROM locked l
            LEFT JOIN devices d ON d.user_id = l.user_id AND d.active = 1
            """, bindings
        ) { raw in
            let row = raw.named(PrefetchColumn.self)
            let userId = row.text(.userId)
            prefetched.heads[userId] = row.int64(.headSeq)
            var devices = prefetched.devices[userId] ?? []  // (a user without devices: one row, NULL)
            if let deviceId = row.optionalText(.deviceId) { devices.append(deviceId) }
            prefetched.devices[userId] = devices
        }
        db.prefetched = prefetched
    }

    /// Whether this node delivers pushes and events and prunes: always on SQLite; on PostgreSQL
    /// the node holding the delivery lease (`PostgresCluster`).
    package var delivers: Bool { cluster?.isLeader ?? true }

    /// The completion of a write nobody waits for: failures go to `onFailure`.
    func logFailure<T>(_ write: String) -> @Sendable (Result<T, StoreError>) -> Void {
        let onFailure = self.onFailure
        return { result in
            if case .failure(let error) = result { onFailure(write, error) }
        }
    }

    package func close() {
        cluster?.stop()
        writer.stop()
        readers.closeAll()
    }

    // MARK: Messages

    package func accept(_ new: NewMessage, completion: @escaping @Sendable (Result<AcceptOutcome, StoreError>) -> Void)
    {
        let epochFor = self.epochFor
        writer.submit(
            effect: \.effect, leadIfIdle: true, rows: new.message.recipients.count, locking: new.message.recipients,
            { db throws(DatabaseError) in try Self.accept(new, db, epochFor: epochFor) },
            completion: { completion($0.map(\.outcome)) })
    }

    package func acceptBatch(
        _ messages: [NewMessage], committed: @escaping @Sendable (_ index: Int, AcceptOutcome) -> Void,
        completion: @escaping @Sendable (Result<[AcceptOutcome], StoreError>) -> Void
    ) {
        let epochFor = self.epochFor
        // One bulk write per message, each in its own savepoint: the writer spreads them over
        // transactions of at most `StoreWriter.maxRows` rows and lets other writes in between.
        // (One write for the whole batch kept every row of it in one savepoint, whose in-memory
        // sub-journal SQLite walks from its start at the end of each statement: the batch's cost
        // grew with its square and with the database, 2.5 s for the first 100k rows, 30 s for the
        // fifth.) Bulk writes never lead: a batch on an HTTP thread would stall that thread's
        // other connections.
        let tally = LockedValue(BatchTally(count: messages.count))
        for (index, new) in messages.enumerated() {
            writer.submit(
                effect: \.effect, rows: new.message.recipients.count, bulk: true, locking: new.message.recipients,
                { db throws(DatabaseError) in try Self.accept(new, db, epochFor: epochFor) },
                completion: { result in
                    if case .success(let accepted) = result { committed(index, accepted.outcome) }
                    let done = tally.withLock { $0.record(index, result.map(\.outcome)) }
                    if let done { completion(done) }
                })
        }
    }

    /// What `accept` did, and whether it queued push jobs (`WriteEffect.jobs`: a recipient has a
    /// registered device) or only stored data.
    struct Accepted: Sendable {
        var outcome: AcceptOutcome
        var effect: WriteEffect
    }

    /// One message into the inboxes of its recipients, inside the caller's transaction.
    static func accept(
        _ new: NewMessage, _ db: SQLWrite, epochFor: (String) -> String
    ) throws(DatabaseError) -> Accepted {
        let message = new.message
        var existing: (fingerprint: [UInt8], recipients: String, expiresAt: Int64)?
        // (Optimistically, a replay fails the insert into `messages` instead, and is answered in the rerun.)
        if !db.isOptimistic {
            try db.query("SELECT fingerprint, recipients, expires_at FROM messages WHERE id = ?", [.text(message.id)]) {
                existing = ($0.bytes(0), $0.text(1), $0.int64(2))
            }
        }
        if let targets = new.targets { try Self.makeContentFree(db, targets.contentFree, now: new.now) }
        if let existing {
            let recipients = Self.decodeRecipients(existing.recipients)
            var outcome = AcceptOutcome.conflict
            if existing.fingerprint == new.fingerprint {
                outcome = .replay(recipients)
            } else if let supersedes = new.targets?.supersedes, existing.fingerprint == supersedes {
                try Self.replaceContent(db, message, fingerprint: new.fingerprint)
                outcome = .replay(recipients)
            }
            guard let targets = new.targets, let policy = new.delivery else {
                return Accepted(outcome: outcome, effect: .data)
            }
            let queued = try Self.queueMissingPushJobs(
                db, targets, recipients: recipients, message: message, new: new, policy: policy,
                expiresAt: Timestamp(milliseconds: existing.expiresAt))
            return Accepted(outcome: outcome, effect: queued ? .jobs : .data)
        }
        let now = new.now.milliseconds
        let expiresAt = now + message.ttlSeconds * 1000
        var results: [RecipientSeq] = []
        results.reserveCapacity(message.recipients.count)
        var effect = WriteEffect.data
        for userId in message.recipients {
            // The head row's next seq; a new inbox (and its epoch, worth a hash) only when there is none.
            // Read, then written: the row is locked for the transaction (one writer on SQLite,
            // `lockInboxes` on PostgreSQL). Not `UPDATE … RETURNING`: SQLite gives that a statement
            // journal, truncated at its end by walking the savepoint's sub-journal from its start,
            // a cost that grew with every row the savepoint had written before (`perf`: 74 % of the
            // writer in that walk during a 100k-row batch).
            var head: Int64?
            if db.isOptimistic, let prefetched = db.prefetched.heads[userId] {
                head = prefetched
            } else {
                try db.query("SELECT head_seq FROM inboxes WHERE user_id = ?", [.text(userId)]) { head = $0.int64(0) }
            }
            var seq: Int64 = 0
            if let head {
                seq = head + 1
                if db.isOptimistic { db.prefetched.heads[userId] = seq }
                try db.run("UPDATE inboxes SET head_seq = ? WHERE user_id = ?", [.int(seq), .text(userId)])
            }
            if seq == 0 {
                // (Another node may create it meanwhile: then its row is the one counted on.)
                try db.query(
                    """
                    INSERT INTO inboxes(user_id, epoch, head_seq, created_at) VALUES (?, ?, 1, ?)
                    ON CONFLICT(user_id) DO UPDATE SET head_seq = inboxes.head_seq + 1 RETURNING head_seq
                    """, [.text(userId), .text(epochFor(userId)), .int(now)]
                ) { seq = $0.int64(0) }
            }
            // A job for every registered device, online or not: the policy set its due time.
            let online = new.online[userId] ?? []
            var initial: InitialDelivery = online.isEmpty ? .stored : .live
            if let policy = new.delivery,
                try Self.queuePushJobs(
                    db, userId: userId, seq: seq, message: message, now: new.now, policy: policy,
                    expiresAt: Timestamp(milliseconds: expiresAt), online: online,
                    only: new.targets.map { $0.devices[userId] ?? [] })
            {
                effect = .jobs
                if online.isEmpty { initial = .push }
            }
            try db.run(
                """
                INSERT INTO inbox_entries(user_id, seq, message_id, created_at, expires_at, state)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(userId), .int(seq), .text(message.id), .int(now), .int(expiresAt),
                    .text(initial == .live ? DeliveryState.live.rawValue : DeliveryState.stored.rawValue),
                ])
            results.append(RecipientSeq(userId: userId, seq: seq, delivery: initial))
            db.note(.committed(userId: userId, seq: seq))
        }
        try db.run(
            """
            INSERT INTO messages(id, fingerprint, conversation_id, sender_id, payload, push, priority,
                collapse_key, created_at, expires_at, recipients)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(message.id), .blob(new.fingerprint), .optional(message.conversationId),
                .optional(message.senderId), .text(String(decoding: message.payload, as: UTF8.self)),
                .optional(message.push.map { String(decoding: $0, as: UTF8.self) }),
                .text(message.priority.rawValue), .optional(message.collapseKey), .int(now), .int(expiresAt),
                .text(Self.encodeRecipients(results)),
            ])
        return Accepted(outcome: .accepted(results), effect: effect)
    }

    /// Marks devices content-free (`PushTargets.contentFree`).
    static func makeContentFree(
        _ db: any SQLStatements, _ devices: [String: Set<String>], now: Timestamp
    ) throws(DatabaseError) {
        for (userId, deviceIds) in devices {
            for deviceId in deviceIds {
                try db.run(
                    """
                    UPDATE devices SET content_free = 1, updated_at = ?
                    WHERE user_id = ? AND device_id = ? AND content_free = 0
                    """, [.int(now.milliseconds), .text(userId), .text(deviceId)])
            }
        }
    }

    /// Overwrites a stored message's content (`PushTargets.supersedes`); its inbox entries,
    /// times and recipients stay.
    static func replaceContent(
        _ db: any SQLStatements, _ message: IncomingMessage, fingerprint: [UInt8]
    ) throws(DatabaseError) {
        try db.run(
            """
            UPDATE messages SET fingerprint = ?, conversation_id = ?, sender_id = ?, payload = ?, push = ?, priority = ?
            WHERE id = ?
            """,
            [
                .blob(fingerprint), .optional(message.conversationId), .optional(message.senderId),
                .text(String(decoding: message.payload, as: UTF8.self)),
                .optional(message.push.map { String(decoding: $0, as: UTF8.self) }), .text(message.priority.rawValue),
                .text(message.id),
            ])
    }

    /// A stored message addressed again: each targeted device of a recipient that has no job for
    /// it yet gets one, unless the recipient already acked it. Returns whether any device was
    /// considered (the notifier must look).
    static func queueMissingPushJobs(
        _ db: SQLWrite, _ targets: PushTargets, recipients: [RecipientSeq], message: IncomingMessage,
        new: NewMessage, policy: DeliveryPolicy, expiresAt: Timestamp
    ) throws(DatabaseError) -> Bool {
        var queued = false
        for recipient in recipients {
            guard let devices = targets.devices[recipient.userId], !devices.isEmpty else { continue }
            var ackSeq: Int64 = 0
            try db.query("SELECT ack_seq FROM inboxes WHERE user_id = ?", [.text(recipient.userId)]) {
                ackSeq = $0.int64(0)
            }
            if try queuePushJobs(
                db, userId: recipient.userId, seq: recipient.seq, message: message, now: new.now, policy: policy,
                expiresAt: expiresAt, online: new.online[recipient.userId] ?? [], only: devices, ackSeq: ackSeq)
            {
                queued = true
            }
        }
        return queued
    }

    /// Recipients as stored: `[["user", seq, "delivery"], …]`.
    static func encodeRecipients(_ recipients: [RecipientSeq]) -> String {
        var writer = JSONWriter(capacity: recipients.count * 32)
        writer.beginArray()
        for recipient in recipients {
            writer.beginArray()
            writer.string(recipient.userId)
            writer.int(recipient.seq)
            writer.string(recipient.delivery.rawValue)
            writer.endArray()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decodeRecipients(_ text: String) -> [RecipientSeq] {
        guard case .array(let rows)? = try? JSONParser.parse(Array(text.utf8)) else { return [] }
        return rows.compactMap { row in
            guard case .array(let fields) = row, fields.count == 3, let userId = fields[0].stringValue,
                let seq = fields[1].int64Value, let delivery = fields[2].stringValue.flatMap(InitialDelivery.init)
            else { return nil }
            return RecipientSeq(userId: userId, seq: seq, delivery: delivery)
        }
    }

    enum MessageColumn: Int32, SQLColumns {
        case id, conversationId, senderId, payload, push, priority, collapseKey, createdAt, expiresAt, recipients
    }

    package func message(id: String, now: Timestamp) throws(StoreError) -> StoredMessage? {
        try read { db throws(DatabaseError) in
            var found: StoredMessage?
            var recipients: [RecipientSeq] = []
            try db.query("SELECT \(MessageColumn.list) FROM messages WHERE id = ?", [.text(id)]) { raw in
                let row = raw.named(MessageColumn.self)
                found = StoredMessage(
                    id: row.text(.id), conversationId: row.optionalText(.conversationId),
                    senderId: row.optionalText(.senderId), payload: row.bytes(.payload), push: row.optionalBytes(.push),
                    priority: row.text(.priority), collapseKey: row.optionalText(.collapseKey),
                    createdAt: row.timestamp(.createdAt), expiresAt: row.timestamp(.expiresAt), recipients: [])
                recipients = Self.decodeRecipients(row.text(.recipients))
            }
            guard var message = found else { return nil }
            for recipient in recipients {
                var cursors: (ack: Int64, fetched: Int64) = (0, 0)
                try db.query("SELECT ack_seq, fetched_seq FROM inboxes WHERE user_id = ?", [.text(recipient.userId)]) {
                    cursors = ($0.int64(0), $0.int64(1))
                }
                var recorded: DeliveryState?
                var expiresAt = message.expiresAt
                try db.query(
                    "SELECT state, expires_at FROM inbox_entries WHERE user_id = ? AND seq = ?",
                    [.text(recipient.userId), .int(recipient.seq)]
                ) {
                    recorded = DeliveryState(rawValue: $0.text(0))
                    expiresAt = Timestamp(milliseconds: $0.int64(1))
                }
                // An entry already pruned was either acked (and past retention) or expired.
                let state = DeliveryState.derive(
                    recorded: recorded ?? .expired, seq: recipient.seq, ackSeq: cursors.ack,
                    fetchedSeq: cursors.fetched,
                    expiresAt: recorded == nil ? Timestamp(milliseconds: 0) : expiresAt, now: now)
                message.recipients.append((recipient.userId, recipient.seq, state))
            }
            return message
        }
    }

    // MARK: Inbox

    package func inboxHead(userId: String) throws(StoreError) -> InboxHead {
        try read { db throws(DatabaseError) in try self.head(userId, db) }
    }

    enum HeadColumn: Int32, SQLColumns {
        case epoch, headSeq, ackSeq, prunedSeq
    }

    static let headSQL = "SELECT \(HeadColumn.list) FROM inboxes WHERE user_id = ?"

    private func head(_ userId: String, _ db: any SQLStatements) throws(DatabaseError) -> InboxHead {
        var head = InboxHead(
            userId: userId, epoch: epochFor(userId), headSeq: 0, ackSeq: 0, prunedSeq: 0)
        try db.query(Self.headSQL, [.text(userId)]) { raw in
            let row = raw.named(HeadColumn.self)
            head.epoch = row.text(.epoch)
            head.headSeq = row.int64(.headSeq)
            head.ackSeq = row.int64(.ackSeq)
            head.prunedSeq = row.int64(.prunedSeq)
        }
        return head
    }

    enum InboxMessageColumn: Int32, SQLColumns {
        case seq, id, conversationId, senderId, payload, createdAt

        var expression: String { self == .seq ? "e.seq" : "m.\(column)" }
    }

    static let catchUpSQL = """
        SELECT \(InboxMessageColumn.list)
        FROM inbox_entries e JOIN messages m ON m.id = e.message_id
        WHERE e.user_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?
        """

    package func catchUp(
        userId: String, after: Int64, epoch: String?, limit: Int, maxBytes: Int
    ) throws(StoreError) -> CatchUpPage {
        try read { db throws(DatabaseError) in
            // One read transaction: the head and the rows come from the same snapshot.
            try db.readSnapshot { () throws(DatabaseError) in
                let head = try self.head(userId, db)
                let window = CatchUpWindow(
                    after: after, clientEpoch: epoch, epoch: head.epoch, headSeq: head.headSeq,
                    prunedSeq: head.prunedSeq)
                var page = CatchUpPage(head: head, window: window, messages: [], hasMore: false)
                guard let readAfter = window.readAfter else { return page }
                var bytes = 0
                try db.query(Self.catchUpSQL, [.text(userId), .int(readAfter), .int(Int64(limit) + 1)]) { raw in
                    guard page.messages.count < limit, bytes < maxBytes else {
                        page.hasMore = true
                        return
                    }
                    let row = raw.named(InboxMessageColumn.self)
                    let message = InboxMessage(
                        seq: row.int64(.seq), id: row.text(.id), conversationId: row.optionalText(.conversationId),
                        senderId: row.optionalText(.senderId), payload: row.bytes(.payload),
                        createdAt: row.timestamp(.createdAt))
                    bytes += message.payload.count
                    page.messages.append(message)
                }
                return page
            }
        }
    }

    package func markFetched(userId: String, seq: Int64) {
        writer.submit(
            locking: [userId],
            { db throws(DatabaseError) in
                try db.run(
                    "UPDATE inboxes SET fetched_seq = ? WHERE user_id = ? AND fetched_seq < ?",
                    [.int(seq), .text(userId), .int(seq)])
            }, completion: logFailure("mark fetched"))
    }

    package func ack(
        userId: String, seq: Int64, epoch: String?, now: Timestamp,
        completion: @escaping @Sendable (Result<AckOutcome, StoreError>) -> Void
    ) {
        writer.submit(
            locking: [userId],
            { db throws(DatabaseError) in
                let head = try self.head(userId, db)
                if let epoch, epoch != head.epoch { return AckOutcome.epochMismatch(current: head.epoch) }
                guard seq <= head.headSeq else { return .beyondHead(headSeq: head.headSeq) }
                guard seq > head.ackSeq else { return .unchanged(ackSeq: head.ackSeq) }
                try db.run("UPDATE inboxes SET ack_seq = ? WHERE user_id = ?", [.int(seq), .text(userId)])
                try Self.applyAckToPushes(
                    db, userId: userId, old: head.ackSeq, new: seq, now: now.milliseconds)
                return .acknowledged(ackSeq: seq)
            }, completion: completion)
    }

    // MARK: Devices

    package func putDevice(
        _ device: Device, keeping: DeviceFields = [],
        completion: @escaping @Sendable (Result<(device: Device, created: Bool), StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                var existing: Device?
                try db.query(
                    "SELECT \(Self.deviceColumns) WHERE user_id = ? AND device_id = ?",
                    [.text(device.userId), .text(device.deviceId)]
                ) { existing = Self.device($0) }
                var device = device
                if let existing {
                    if keeping.contains(.platform) { device.platform = existing.platform }
                    if keeping.contains(.contentFree) { device.contentFree = existing.contentFree }
                    if keeping.contains(.matrix) { device.matrix = existing.matrix }
                }
                var stored = device
                if let existing { stored.createdAt = existing.createdAt }
                let createdAt = existing?.createdAt
                db.prefetched.devices[device.userId] = nil
                if let matrix = device.matrix {
                    // One device per pushkey: the newest registration takes it over (the app
                    // was reinstalled, or the user signed in on another account).
                    try db.run(
                        """
                        UPDATE devices SET matrix_app_id = NULL, matrix_pushkey = NULL
                        WHERE matrix_app_id = ? AND matrix_pushkey = ? AND NOT (user_id = ? AND device_id = ?)
                        """, [.text(matrix.appId), .text(matrix.pushkey), .text(device.userId), .text(device.deviceId)])
                }
                try db.run(
                    """
                    INSERT INTO devices(user_id, device_id, transport, platform, content_free, active, disabled_reason,
                        created_at, updated_at, matrix_app_id, matrix_pushkey)
                    VALUES (?, ?, ?, ?, ?, 1, NULL, ?, ?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE SET transport = excluded.transport,
                        platform = excluded.platform, content_free = excluded.content_free, active = 1,
                        disabled_reason = NULL, updated_at = excluded.updated_at,
                        matrix_app_id = excluded.matrix_app_id, matrix_pushkey = excluded.matrix_pushkey
                    """,
                    [
                        .text(device.userId), .text(device.deviceId), .text(device.target), .optional(device.platform),
                        .int(device.contentFree ? 1 : 0), .int(stored.createdAt.milliseconds),
                        .int(device.updatedAt.milliseconds), .optional(device.matrix?.appId),
                        .optional(device.matrix?.pushkey),
                    ])
                stored.active = true
                stored.disabledReason = nil
                return (device: stored, created: createdAt == nil)
            }, completion: completion)
    }

    package func reenableDevices(
        reason: String, since: Timestamp, now: Timestamp,
        completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                // (A device's updated_at is when it was disabled, while it stays disabled.)
                try db.run(
                    """
                    UPDATE devices SET active = 1, disabled_reason = NULL, updated_at = ?
                    WHERE active = 0 AND updated_at >= ? AND substr(disabled_reason, 1, ?) = ?
                    """,
                    [
                        .int(now.milliseconds), .int(since.milliseconds), .int(Int64(reason.unicodeScalars.count)),
                        .text(reason),
                    ])
                let changed = db.changes
                if changed > 0 { db.prefetched.devices.removeAll() }
                return changed
            }, completion: completion)
    }

    package func deleteDevice(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                try db.run("DELETE FROM devices WHERE user_id = ? AND device_id = ?", [.text(userId), .text(deviceId)])
                db.prefetched.devices[userId] = nil
                let existed = db.changes > 0
                // Nor is it one of the user's devices in presence (nor counted by `maxDevicesPerUser`).
                try db.run(
                    "DELETE FROM presence WHERE user_id = ? AND device_id = ?", [.text(userId), .text(deviceId)])
                // Its pending pushes can never go anywhere now (a device registered again later
                // starts afresh).
                try Self.apply(DeliveryPolicy.deleted(userId: userId, deviceId: deviceId), db, now: time.milliseconds)
                try db.run(
                    """
                    INSERT INTO token_revocations(user_id, device_id, revoked_at) VALUES (?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE SET revoked_at = excluded.revoked_at
                    """, [.text(userId), .text(deviceId), .int(time.seconds)])
                db.note(.revoked(userId: userId, deviceId: deviceId, atSeconds: time.seconds))
                return existed
            }, completion: completion)
    }

    enum RevocationColumn: Int32, SQLColumns {
        case userId, deviceId, revokedAt
    }

    package func tokenRevocations() throws(StoreError) -> [TokenRevocation] {
        try read { db throws(DatabaseError) in
            var revocations: [TokenRevocation] = []
            try db.query("SELECT \(RevocationColumn.list) FROM token_revocations") { raw in
                let row = raw.named(RevocationColumn.self)
                revocations.append(
                    TokenRevocation(
                        userId: row.text(.userId), deviceId: row.text(.deviceId),
                        revokedAtSeconds: row.int64(.revokedAt)))
            }
            return revocations
        }
    }

    package func devices(userId: String) throws(StoreError) -> [Device] {
        try read { db throws(DatabaseError) in
            var devices: [Device] = []
            try db.query("SELECT \(Self.deviceColumns) WHERE user_id = ? ORDER BY device_id", [.text(userId)]) {
                devices.append(Self.device($0))
            }
            return devices
        }
    }

    package func device(matrixAppId appId: String, pushkey: String) throws(StoreError) -> Device? {
        try read { db throws(DatabaseError) in
            var found: Device?
            try db.query(
                "SELECT \(Self.deviceColumns) WHERE matrix_app_id = ? AND matrix_pushkey = ?",
                [.text(appId), .text(pushkey)]
            ) { found = Self.device($0) }
            return found
        }
    }

    enum DeviceColumn: Int32, SQLColumns {
        case userId, deviceId, transport, platform, contentFree, active, disabledReason, createdAt, updatedAt
        case matrixAppId, matrixPushkey
    }

    static let deviceColumns = "\(DeviceColumn.list) FROM devices"

    static func device(_ raw: any SQLRow) -> Device {
        let row = raw.named(DeviceColumn.self)
        return Device(
            userId: row.text(.userId), deviceId: row.text(.deviceId), target: row.text(.transport),
            platform: row.optionalText(.platform), contentFree: row.bool(.contentFree), active: row.bool(.active),
            disabledReason: row.optionalText(.disabledReason), createdAt: row.timestamp(.createdAt),
            updatedAt: row.timestamp(.updatedAt),
            matrix: row.optionalText(.matrixAppId).flatMap { appId in
                row.optionalText(.matrixPushkey).map { MatrixPusher(appId: appId, pushkey: $0) }
            })
    }

    // MARK: Presence

    package func recordLastOnline(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO presence(user_id, device_id, last_online) VALUES (?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE
                        SET last_online = \(db.dialect.greatest)(presence.last_online, excluded.last_online)
                    """, [.text(userId), .text(deviceId), .int(time.milliseconds)])
            }, completion: completion)
    }

    package func lastOnline(userId: String) throws(StoreError) -> [String: Timestamp] {
        try read { db throws(DatabaseError) in
            var devices: [String: Timestamp] = [:]
            try db.query("SELECT device_id, last_online FROM presence WHERE user_id = ?", [.text(userId)]) {
                devices[$0.text(0)] = Timestamp(milliseconds: $0.int64(1))
            }
            return devices
        }
    }

    // MARK: Maintenance

    package func secret(named name: String, generate: @Sendable () -> String) throws(StoreError) -> String {
        let candidate = generate()
        let result = waitFor { (completion: @escaping @Sendable (Result<String, StoreError>) -> Void) in
            writer.submit(
                { db throws(DatabaseError) in
                    // The first node to store it wins; every other one reads that.
                    try db.run(
                        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                        [.text(name), .text(candidate)])
                    var value = candidate
                    try db.query("SELECT value FROM meta WHERE key = ?", [.text(name)]) { value = $0.text(0) }
                    return value
                }, completion: completion)
        }
        return try result.get()
    }

    package func prune(
        now: Timestamp, retentionSeconds: Int64,
        completion: @escaping @Sendable (Result<PruneResult, StoreError>) -> Void
    ) {
        // On a cluster, the node that delivers also prunes (one pass at a time, no lock fights).
        guard delivers else { return completion(.success(PruneResult(removed: 0, nextDue: nil))) }
        let cutoff = now.milliseconds - retentionSeconds * 1000
        writer.submit(
            effect: { _ in .maintenance },
            { db throws(DatabaseError) in
                try db.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS doomed(user_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL)"
                )
                try db.run("DELETE FROM doomed")
                // Entries of expired messages, and entries acked and older than the retention
                // window; bounded per pass (the next pass takes the rest).
                try db.run(
                    """
                    INSERT INTO doomed(user_id, seq, message_id)
                    SELECT e.user_id, e.seq, e.message_id FROM messages m JOIN inbox_entries e ON e.message_id = m.id
                    WHERE m.expires_at <= ?1
                    UNION
                    SELECT e.user_id, e.seq, e.message_id FROM inbox_entries e JOIN inboxes i ON i.user_id = e.user_id
                    WHERE e.created_at <= ?2 AND e.seq <= i.ack_seq
                    LIMIT 20000
                    """, [.int(now.milliseconds), .int(cutoff)])
                try db.run(
                    """
                    UPDATE inboxes SET pruned_seq = \(db.dialect.greatest)(pruned_seq,
                        (SELECT max(seq) FROM doomed d WHERE d.user_id = inboxes.user_id))
                    WHERE user_id IN (SELECT user_id FROM doomed)
                    """)
                try db.run("DELETE FROM inbox_entries WHERE (user_id, seq) IN (SELECT user_id, seq FROM doomed)")
                let removed = db.changes
                // Finished push jobs are kept for the retention window (dead letters can be retried).
                try db.run(
                    "DELETE FROM push_jobs WHERE state != \(JobState.pending.sql) AND updated_at <= ?", [.int(cutoff)])
                try Self.foldPushJobCounts(db)
                try db.run(
                    "DELETE FROM event_jobs WHERE state != \(JobState.pending.sql) AND updated_at <= ?", [.int(cutoff)])
                // A message goes with its last entry (it also holds the idempotency record).
                try db.run(
                    """
                    DELETE FROM messages WHERE id IN (SELECT DISTINCT message_id FROM doomed)
                    AND NOT EXISTS (SELECT 1 FROM inbox_entries e WHERE e.message_id = messages.id)
                    """)
                // A pass that hit its bound has more to do at once.
                if removed >= 20000 { return PruneResult(removed: removed, nextDue: now) }
                var next: Int64?
                try db.query(
                    """
                    SELECT min(t) FROM (
                        SELECT min(expires_at) AS t FROM messages
                        UNION ALL SELECT min(e.created_at) + ?1 FROM inbox_entries e JOIN inboxes i
                            ON i.user_id = e.user_id WHERE e.seq <= i.ack_seq
                        UNION ALL SELECT min(updated_at) + ?1 FROM push_jobs WHERE state != \(JobState.pending.sql)
                        UNION ALL SELECT min(updated_at) + ?1 FROM event_jobs
                            WHERE state != \(JobState.pending.sql)) AS due
                    """, [.int(retentionSeconds * 1000)]
                ) { next = $0.optionalInt64(0) }
                return PruneResult(removed: removed, nextDue: next.map { Timestamp(milliseconds: $0) })
            }, completion: completion)
    }

    /// Answers from what the writer last did while it is busy (`WriterHealth`): a probe queued
    /// behind large batches would wait for them.
    package func checkWritable(completion: @escaping @Sendable (Bool) -> Void) {
        switch writer.readiness() {
        case .ready: return completion(true)
        case .unready: return completion(false)
        case .probe: break
        }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO meta(key, value) VALUES ('ready_probe', 'ok')
                    ON CONFLICT(key) DO UPDATE SET value = excluded.value
                    """)
            }, completion: { completion((try? $0.get()) != nil) })
    }

    // MARK: Helpers

    func read<T>(_ body: (any SQLConnection) throws(DatabaseError) -> T) throws(StoreError) -> T {
        do {
            return try readers.read(body)
        } catch {
            throw .unavailable(error)
        }
    }

    /// Blocks until a callback-style write completes; for start-up only, never on a request path.
    private func waitFor<T: Sendable>(
        _ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void
    ) -> Result<T, StoreError> {
        let box = LockedValue<Result<T, StoreError>?>(nil)
        start { result in
            box.withLock { $0 = result }
            box.signal()
        }
        return box.withLock(when: { $0 != nil }) { $0 } ?? .failure(.closed)
    }
}

// MARK: Cluster

extension SQLStore {
    package func observeCluster(_ observer: ClusterObserver) { cluster?.observe(observer) }

    package func announcePresence(userId: String, deviceId: String, online: Bool) {
        guard let cluster else { return }
        writer.submit(
            { db throws(DatabaseError) in
                if online {
                    try db.run(
                        "INSERT INTO online_devices(node_id, user_id, device_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        [.text(cluster.nodeId), .text(userId), .text(deviceId)])
                } else {
                    try db.run(
                        "DELETE FROM online_devices WHERE node_id = ? AND user_id = ? AND device_id = ?",
                        [.text(cluster.nodeId), .text(userId), .text(deviceId)])
                }
                db.note(.presence(userId: userId, deviceId: deviceId, online: online))
            }, completion: logFailure("announce presence"))
    }

    package func renewLease(until: Timestamp) {
        guard let cluster else { return }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO nodes(node_id, lease_until) VALUES (?, ?)
                    ON CONFLICT(node_id) DO UPDATE SET lease_until = excluded.lease_until
                    """, [.text(cluster.nodeId), .int(until.milliseconds)])
                db.note(.lease(until: until))
            }, completion: logFailure("renew lease"))
    }

    enum PresenceColumn: Int32, SQLColumns {
        case nodeId, userId, deviceId, leaseUntil

        var expression: String { self == .leaseUntil ? "n.lease_until" : "o.\(column)" }
    }

    package func clusterPresence() throws(StoreError) -> [RemotePresence] {
        guard let cluster else { return [] }
        return try read { db throws(DatabaseError) in
            var found: [RemotePresence] = []
            try db.query(
                """
                SELECT \(PresenceColumn.list) FROM online_devices o
                JOIN nodes n ON n.node_id = o.node_id WHERE o.node_id != ?
                """, [.text(cluster.nodeId)]
            ) { raw in
                let row = raw.named(PresenceColumn.self)
                found.append(
                    RemotePresence(
                        nodeId: row.text(.nodeId), userId: row.text(.userId), deviceId: row.text(.deviceId),
                        leaseUntil: row.timestamp(.leaseUntil)))
            }
            return found
        }
    }

    package func forgetNode(_ nodeId: String) {
        guard cluster != nil else { return }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run("DELETE FROM online_devices WHERE node_id = ?", [.text(nodeId)])
                try db.run("DELETE FROM nodes WHERE node_id = ?", [.text(nodeId)])
            }, completion: logFailure("forget node"))
    }
}
