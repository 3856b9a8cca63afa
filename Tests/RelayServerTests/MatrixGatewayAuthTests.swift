import RelayCore
import RelayLocks
import RelayREST
import RelayServer
import Testing

/// The Matrix gateway's credential: how the secret is compared, and the budget of wrong ones.
@Suite struct MatrixGatewayAuthTests {
    /// Both sides go through the digest, whatever their lengths, so that the byte comparison
    /// always runs over two 32-byte digests (a length check first would answer a short guess
    /// sooner than a long one).
    @Test func theSecretIsComparedAsDigests() {
        let seen = LockedValue<[[UInt8]]>([])
        let spy: ([UInt8]) -> [UInt8] = { bytes in
            seen.withLock { $0.append(bytes) }
            return Array(repeating: UInt8(truncatingIfNeeded: bytes.count), count: 32)
        }
        let configured = "gateway-secret-0123456789"
        #expect(!Authenticator.matrixSecretMatches(presented: "x", configured: configured, digest: spy))
        #expect(seen.withLock { $0 } == [Array(configured.utf8), Array("x".utf8)])
        // Equal digests are the whole test: a different secret of the same length passes the spy.
        #expect(
            Authenticator.matrixSecretMatches(
                presented: String(repeating: "y", count: 25), configured: configured, digest: spy))
        #expect(Authenticator.matrixSecretMatches(presented: configured, configured: configured))
        #expect(!Authenticator.matrixSecretMatches(presented: configured + "0", configured: configured))
        #expect(!Authenticator.matrixSecretMatches(presented: "", configured: nil))
    }

    /// Wrong secrets are 404 until the caller's address has sent 10, then 429 with a
    /// `Retry-After`, one more allowed per second; another address is unaffected, and the right
    /// secret from the flooding address still passes. On an injected clock.
    @Test func wrongSecretsAreBudgetedPerAddress() {
        let clock = LockedValue<Int64>(5_000_000)
        let auth = Authenticator(
            serverKeys: ["server-key-0123456789"], tokens: ClientTokenCodec(hmac: { $0 }),
            now: { Timestamp(milliseconds: clock.withLock { $0 }) })
        let secret = "gateway-secret-0123456789"
        func status(_ presented: String, from caller: String) -> Int {
            do throws(APIError) {
                try auth.requireMatrixGateway(presented: presented, configured: secret, caller: caller)
                return 200
            } catch {
                return error.status
            }
        }
        for _ in 0..<10 { #expect(status("wrong", from: "192.0.2.1") == 404) }
        #expect(status("wrong", from: "192.0.2.1") == 429)
        #expect(status(secret, from: "192.0.2.1") == 200)
        #expect(status("wrong", from: "192.0.2.2") == 404)
        clock.withLock { $0 += 1000 }
        #expect(status("wrong", from: "192.0.2.1") == 404)
        #expect(status("wrong", from: "192.0.2.1") == 429)
    }
}
