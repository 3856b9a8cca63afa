/// Schema versions, applied in order and recorded in `PRAGMA user_version`.
///
/// Never edit a shipped migration: add the next one.
enum Migrations {
    static let all: [String] = [
        // 1: inboxes, messages, inbox entries, devices, presence, secrets.
        """
        CREATE TABLE meta(
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE inboxes(
            user_id TEXT PRIMARY KEY,
            epoch TEXT NOT NULL,
            head_seq INTEGER NOT NULL DEFAULT 0,
            ack_seq INTEGER NOT NULL DEFAULT 0,
            fetched_seq INTEGER NOT NULL DEFAULT 0,
            pruned_seq INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE messages(
            id TEXT PRIMARY KEY,
            fingerprint BLOB NOT NULL,
            conversation_id TEXT,
            sender_id TEXT,
            payload TEXT NOT NULL,
            push TEXT,
            priority TEXT NOT NULL,
            collapse_key TEXT,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            recipients TEXT NOT NULL
        );
        CREATE INDEX messages_by_expiry ON messages(expires_at);
        CREATE TABLE inbox_entries(
            user_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            state TEXT NOT NULL,
            PRIMARY KEY(user_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX inbox_entries_by_message ON inbox_entries(message_id);
        CREATE INDEX inbox_entries_by_creation ON inbox_entries(created_at);
        CREATE TABLE devices(
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            push_url TEXT NOT NULL,
            platform TEXT,
            content_free INTEGER NOT NULL DEFAULT 0,
            active INTEGER NOT NULL DEFAULT 1,
            disabled_reason TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY(user_id, device_id)
        ) WITHOUT ROWID;
        CREATE TABLE presence(
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            last_online INTEGER NOT NULL,
            PRIMARY KEY(user_id, device_id)
        ) WITHOUT ROWID;
        """,
        // 2: the push outbox. A job per (message, device) while pending; `webhook_id` stays the
        // same across retries of one delivery (Standard Webhooks' idempotency key).
        """
        CREATE TABLE push_jobs(
            id INTEGER PRIMARY KEY,
            webhook_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            message_id TEXT,
            seq INTEGER NOT NULL,
            collapse_key TEXT,
            state TEXT NOT NULL,
            due_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        );
        CREATE INDEX push_jobs_pending ON push_jobs(due_at) WHERE state = 'pending';
        CREATE INDEX push_jobs_by_device ON push_jobs(user_id, device_id, state);
        CREATE INDEX push_jobs_by_message ON push_jobs(message_id);
        """,
        // 3: the event outbox (webhooks to the chat server's eventsUrl).
        """
        CREATE TABLE event_jobs(
            id INTEGER PRIMARY KEY,
            webhook_id TEXT NOT NULL,
            type TEXT NOT NULL,
            body TEXT NOT NULL,
            state TEXT NOT NULL,
            due_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        );
        CREATE INDEX event_jobs_pending ON event_jobs(due_at) WHERE state = 'pending';
        """,
        // 4: deleting a device revokes the client tokens issued for it until then.
        """
        CREATE TABLE token_revocations(
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            revoked_at INTEGER NOT NULL,
            PRIMARY KEY(user_id, device_id)
        ) WITHOUT ROWID;
        """,
        // 5: Matrix pushers (a device may carry the homeserver's app id and pushkey; one device
        // per pushkey), and a badge a push carries instead of the relay's unread count.
        """
        ALTER TABLE devices ADD COLUMN matrix_app_id TEXT;
        ALTER TABLE devices ADD COLUMN matrix_pushkey TEXT;
        CREATE UNIQUE INDEX devices_by_matrix_pushkey ON devices(matrix_app_id, matrix_pushkey)
            WHERE matrix_pushkey IS NOT NULL;
        ALTER TABLE push_jobs ADD COLUMN badge INTEGER;
        """,
        // 6: push jobs counted per state in the transaction that changes them (triggers: no
        // write path can forget one), so `/v1/stats` reads four rows instead of counting the
        // outbox (finished jobs are kept for the retention window: millions of rows); `shard`
        // is always 0 here (PostgreSQL's counters are per connection). Indexes for the
        // dead-letter list, newest first, with and without a user.
        """
        CREATE TABLE push_job_counts(
            state TEXT NOT NULL,
            shard INTEGER NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY(state, shard)
        ) WITHOUT ROWID;
        CREATE TRIGGER push_jobs_counted_insert AFTER INSERT ON push_jobs BEGIN
            INSERT INTO push_job_counts(state, shard, n) VALUES (NEW.state, 0, 1)
                ON CONFLICT(state, shard) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER push_jobs_counted_delete AFTER DELETE ON push_jobs BEGIN
            UPDATE push_job_counts SET n = n - 1 WHERE state = OLD.state AND shard = 0;
        END;
        CREATE TRIGGER push_jobs_counted_update AFTER UPDATE OF state ON push_jobs
        WHEN OLD.state IS NOT NEW.state BEGIN
            UPDATE push_job_counts SET n = n - 1 WHERE state = OLD.state AND shard = 0;
            INSERT INTO push_job_counts(state, shard, n) VALUES (NEW.state, 0, 1)
                ON CONFLICT(state, shard) DO UPDATE SET n = n + 1;
        END;
        INSERT INTO push_job_counts(state, shard, n) SELECT state, 0, count(*) FROM push_jobs GROUP BY state;
        CREATE INDEX push_jobs_by_state ON push_jobs(state, updated_at);
        CREATE INDEX push_jobs_by_user_state ON push_jobs(user_id, state, updated_at);
        """,
        // 7: a device names its transport: a webhook's URL as before, or a push service's token
        // as JSON (`PushTransport.target`). Renamed so that an older build, which would read
        // such a row as a malformed URL and dead-letter its pushes, refuses this schema.
        """
        ALTER TABLE devices RENAME COLUMN push_url TO transport;
        """,
        // 8: the delivery trace: every push attempt, by device and the seqs it covered (the last
        // `SQLStore.attemptsKeptPerDevice` of a device, for the retention window).
        """
        CREATE TABLE push_attempts(
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            push_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            seq_from INTEGER NOT NULL,
            seq_to INTEGER NOT NULL,
            transport TEXT NOT NULL,
            app TEXT NOT NULL,
            at INTEGER NOT NULL,
            latency_ms INTEGER NOT NULL,
            status INTEGER,
            provider_id TEXT,
            result TEXT NOT NULL,
            reason TEXT
        );
        CREATE INDEX push_attempts_by_device ON push_attempts(user_id, device_id);
        """,
        // 9: the message log beside the database (`StatementJournal`): its id, which each record
        // carries (a log beside another database is refused), and the last record the database
        // holds. An older build, which would ignore the log, refuses this schema.
        """
        INSERT INTO meta(key, value) VALUES ('log_id', lower(hex(randomblob(8)))) ON CONFLICT(key) DO NOTHING;
        INSERT INTO meta(key, value) VALUES ('log_lsn', '0') ON CONFLICT(key) DO NOTHING;
        """,
    ]

    /// The first version with the message log.
    static let journaled = 9

    /// Brings the database to the newest version, each step in its own transaction.
    static func apply(to connection: SQLiteConnection) throws(DatabaseError) {
        let current = try connection.userVersion
        guard current <= all.count else {
            throw DatabaseError.sqlite(
                SQLiteError(
                    code: 1, message: "database schema version \(current) is newer than this build (\(all.count))",
                    sql: nil
                ))
        }
        for version in current..<all.count {
            try connection.execute("BEGIN IMMEDIATE")
            do {
                try connection.execute(all[version])
                try connection.execute("PRAGMA user_version = \(version + 1)")
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }
}
