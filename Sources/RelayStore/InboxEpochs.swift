import RelayCore
import RelayCrypto

/// The epochs of a database's inboxes, derived from the database's own key (`meta.epoch_key`,
/// made on first open): derived, so that a read of an inbox not created yet already names the
/// epoch it will have; per database, so that a new database, or a backup given a new key, means
/// new epochs and clients resync instead of resuming from seqs that will be handed out again.
package struct InboxEpochs: Sendable {
    package let key: String

    package init(key: String) {
        self.key = key
    }

    /// A new random key.
    package static func newKey() -> String { Hex.string(Crypto.randomBytes(16)) }

    /// 16 hex characters, stable for a user within one database.
    package func epoch(for userId: String) -> String {
        String(Hex.string(Crypto.sha256(Array((key + ":" + userId).utf8))).prefix(16))
    }
}
