import RelayCore
import RelayCrypto
import RelayLocks
import RelaySettings
import RelayStore

/// The secrets in force: configured ones win; the others are generated on first start and
/// kept in the database, so that tokens and signatures stay valid across restarts.
struct Secrets {
    var serverKeys: [String]
    var clientTokenSecret: String
    var webhookSecret: WebhookSecret
    /// Derives each inbox's epoch; per database, so a new database means new epochs.
    var epochKey: String

    static func resolve(config: RelayConfig, store: any RelayStore) throws -> Secrets {
        let serverKeys =
            config.serverKeys.isEmpty
            ? [try store.secret(named: "server_key") { "prk_" + Hex.string(Crypto.randomBytes(24)) }]
            : config.serverKeys
        let clientTokenSecret =
            try config.clientTokenSecret
            ?? store.secret(named: "client_token_secret") { Hex.string(Crypto.randomBytes(32)) }
        let webhookText =
            try config.webhookSecret
            ?? store.secret(named: "webhook_secret") { WebhookSecret(key: Crypto.randomBytes(32)).text }
        guard let webhookSecret = WebhookSecret(webhookText) else {
            throw ConfigLoader.Error(description: "the stored webhook secret is malformed")
        }
        let epochKey = try store.secret(named: "epoch_key") { Hex.string(Crypto.randomBytes(16)) }
        return Secrets(
            serverKeys: serverKeys, clientTokenSecret: clientTokenSecret, webhookSecret: webhookSecret,
            epochKey: epochKey)
    }

    /// The secrets a relay with this configuration would use, read without generating or
    /// writing anything: configured ones, else the database's; empty or nil where neither exists.
    static func inForce(
        config: RelayConfig
    ) throws(StoreError) -> (serverKeys: [String], clientTokenSecret: String?, webhookSecret: String?) {
        let stored = try SQLStore.storedSecrets(database: config.db)
        return (
            config.serverKeys.isEmpty ? stored["server_key"].map { [$0] } ?? [] : config.serverKeys,
            config.clientTokenSecret ?? stored["client_token_secret"],
            config.webhookSecret ?? stored["webhook_secret"]
        )
    }
}

/// Holds the epoch key, which is read from the store after the store (which needs the epoch
/// function) is open.
final class EpochKeyHolder: Sendable {
    private let keyValue = LockedValue<String>("")

    func set(_ value: String) { keyValue.withLock { $0 = value } }

    var key: String { keyValue.withLock { $0 } }

    /// 16 hex characters, stable for a user within one database.
    func epoch(for userId: String) -> String {
        let secret = key
        return String(Hex.string(Crypto.sha256(Array((secret + ":" + userId).utf8))).prefix(16))
    }
}
