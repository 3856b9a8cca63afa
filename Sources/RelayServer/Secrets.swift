import RelayCore
import RelayCrypto
import RelaySettings
import RelayStore

/// The secrets in force: configured ones win; the others are generated on first start and
/// kept in the database, so that tokens and signatures stay valid across restarts.
struct Secrets {
    var serverKeys: [String]
    var clientTokenSecret: String
    var webhookSecret: WebhookSecret

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
        return Secrets(serverKeys: serverKeys, clientTokenSecret: clientTokenSecret, webhookSecret: webhookSecret)
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
