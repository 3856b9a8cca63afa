/// What a database's schema holds, by name: its tables with their columns, its indexes with
/// their columns in order, and its triggers — what both engines' migrations must agree on
/// (types and spellings are each engine's own). `current` is the one description of it;
/// `SQLStoreTests.theMigrationsMakeTheOneSchema` reads the database the migrations made, on
/// SQLite and on PostgreSQL, and compares. (Found at once: PostgreSQL's dead-letter indexes end
/// in `id`, the tie-break a SQLite index has implicitly in its rowid; read as the same index.)
package struct SchemaShape: Equatable, Sendable, CustomStringConvertible {
    package struct Index: Equatable, Sendable {
        package var table: String
        package var columns: [String]
        package var unique: Bool
    }

    /// Table → its column names, sorted.
    package var tables: [String: [String]] = [:]
    package var indexes: [String: Index] = [:]
    package var triggers: Set<String> = []

    package init() {}

    package init(tables: [String: [String]], indexes: [String: Index], triggers: Set<String>) {
        self.tables = tables.mapValues { $0.sorted() }
        self.indexes = indexes
        self.triggers = triggers
    }

    /// The schema both engines' migrations make.
    package static let current = SchemaShape(
        tables: [
            "devices": [
                "active", "content_free", "created_at", "device_id", "disabled_reason", "matrix_app_id",
                "matrix_pushkey", "platform", "transport", "updated_at", "user_id",
            ],
            "event_jobs": [
                "attempts", "body", "created_at", "due_at", "expires_at", "id", "last_error", "state", "type",
                "updated_at", "webhook_id",
            ],
            "inbox_entries": ["created_at", "expires_at", "message_id", "seq", "state", "user_id"],
            "inboxes": ["ack_seq", "created_at", "epoch", "fetched_seq", "head_seq", "pruned_seq", "user_id"],
            "messages": [
                "collapse_key", "conversation_id", "created_at", "expires_at", "fingerprint", "id", "payload",
                "priority", "push", "recipients", "sender_id",
            ],
            "meta": ["key", "value"],
            "presence": ["device_id", "last_online", "user_id"],
            "push_attempts": [
                "app", "at", "device_id", "id", "kind", "latency_ms", "provider_id", "push_id", "reason", "result",
                "seq_from", "seq_to", "status", "transport", "user_id",
            ],
            "push_job_counts": ["n", "shard", "state"],
            "push_jobs": [
                "attempts", "badge", "collapse_key", "created_at", "device_id", "due_at", "expires_at", "id", "kind",
                "last_error", "message_id", "seq", "state", "updated_at", "user_id", "webhook_id",
            ],
            "token_revocations": ["device_id", "revoked_at", "user_id"],
        ],
        indexes: [
            "devices_by_matrix_pushkey": Index(
                table: "devices", columns: ["matrix_app_id", "matrix_pushkey"], unique: true),
            "event_jobs_pending": Index(table: "event_jobs", columns: ["due_at"], unique: false),
            "inbox_entries_by_creation": Index(table: "inbox_entries", columns: ["created_at"], unique: false),
            "inbox_entries_by_message": Index(table: "inbox_entries", columns: ["message_id"], unique: false),
            "messages_by_expiry": Index(table: "messages", columns: ["expires_at"], unique: false),
            "push_attempts_by_device": Index(
                table: "push_attempts", columns: ["user_id", "device_id"], unique: false),
            "push_jobs_by_device": Index(
                table: "push_jobs", columns: ["user_id", "device_id", "state"], unique: false),
            "push_jobs_by_message": Index(table: "push_jobs", columns: ["message_id"], unique: false),
            "push_jobs_by_state": Index(table: "push_jobs", columns: ["state", "updated_at"], unique: false),
            "push_jobs_by_user_state": Index(
                table: "push_jobs", columns: ["user_id", "state", "updated_at"], unique: false),
            "push_jobs_pending": Index(table: "push_jobs", columns: ["due_at"], unique: false),
        ],
        triggers: ["push_jobs_counted_delete", "push_jobs_counted_insert", "push_jobs_counted_update"])

    /// Tables only PostgreSQL has: the cluster's (`PostgresCluster`) and the schema's version
    /// (SQLite keeps it in `PRAGMA user_version`).
    package static let postgresOnlyTables: [String: [String]] = [
        "nodes": ["lease_until", "node_id"],
        "online_devices": ["device_id", "node_id", "user_id"],
        "schema_version": ["version"],
    ]

    package var description: String {
        var lines = tables.keys.sorted().map { "table \($0)(\(tables[$0, default: []].joined(separator: ", ")))" }
        lines += indexes.keys.sorted().compactMap { name in
            indexes[name].map {
                "\($0.unique ? "unique " : "")index \(name) on \($0.table)(\($0.columns.joined(separator: ", ")))"
            }
        }
        lines += triggers.sorted().map { "trigger \($0)" }
        return lines.joined(separator: "\n")
    }
}
