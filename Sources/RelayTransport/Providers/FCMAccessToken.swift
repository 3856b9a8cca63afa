import RelayCore

/// An OAuth 2.0 access token for FCM, read from Google's token endpoint's answer
/// (`{"access_token": …, "expires_in": 3599, "token_type": "Bearer"}`).
package struct FCMAccessToken: Sendable, Equatable {
    /// The longest lifetime believed (Google gives an hour): a larger `expires_in` is an error.
    package static let maxLifetimeSeconds: Int64 = 86_400

    package enum ParseError: Error, Sendable, Equatable {
        case notAnObject
        /// Missing, empty or not printable ASCII (it goes into a header as is).
        case badAccessToken
        /// Missing, not an integer, or outside 1 s … `maxLifetimeSeconds`.
        case badExpiresIn
        /// Not `Bearer`.
        case unsupportedTokenType
    }

    package var value: String
    /// When the token was asked for (ms): its lifetime is counted from then, not from when the
    /// answer came, so a slow answer errs on the early side.
    package var obtainedAt: Int64
    package var expiresAt: Int64

    package init(value: String, obtainedAt: Int64, expiresAt: Int64) {
        self.value = value
        self.obtainedAt = obtainedAt
        self.expiresAt = expiresAt
    }

    /// - Parameter requestedAt: when the token request was sent (ms).
    package init(response: [UInt8], requestedAt: Int64) throws(ParseError) {
        guard let object = ProviderAnswer.object(response) else { throw .notAnObject }
        guard let token = object["access_token"]?.stringValue, !token.isEmpty,
            token.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else { throw .badAccessToken }
        guard let seconds = object["expires_in"]?.int64Value, (1...Self.maxLifetimeSeconds).contains(seconds) else {
            throw .badExpiresIn
        }
        guard object["token_type"]?.stringValue?.lowercased() == "bearer" else { throw .unsupportedTokenType }
        self.init(value: token, obtainedAt: requestedAt, expiresAt: requestedAt + seconds * 1000)
    }
}
