import RelayCore
import RelayPrimitives

/// A toy MAC keeps the harness free of C libraries; the codec's parsing logic is what is fuzzed.
func toyMAC(_ message: [UInt8]) -> [UInt8] {
    var state: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in message { state = (state ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return (0..<32).map { UInt8(truncatingIfNeeded: state >> UInt64($0 % 8 * 8)) }
}

/// libFuzzer entry: JWT parsing and verification never crash, and whatever is accepted carries
/// the MAC of exactly its signing input, an HS256 header, a subject and an expiry in the future.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let codec = ClientTokenCodec(hmac: { toyMAC($0) }, leeway: 30)
    // The input as a whole token, and the input as the claims of a correctly signed token (so that
    // extreme claim values — exp = 2^63−1, 1e300, negative nbf — reach the claim checks).
    checkToken(String(decoding: bytes, as: UTF8.self), codec: codec)
    let signingInput = "eyJhbGciOiJIUzI1NiJ9." + Base64.encode(bytes, .url)
    checkToken(signingInput + "." + Base64.encode(toyMAC(Array(signingInput.utf8)), .url), codec: codec)
    return 0
}

private func checkToken(_ text: String, codec: ClientTokenCodec) {
    let now: Int64 = 1_800_000_000
    _ = Base64.decode(text, .url)
    guard let claims = try? codec.verify(text, now: now) else { return }
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    let signingInput = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    if Base64.decode(parts[2], .url) != toyMAC(signingInput) { fatalError("accepted a token with a wrong signature") }
    if claims.userId.isEmpty || claims.expiresAt <= now - codec.leeway {
        fatalError("accepted a token without subject or expiry")
    }
    if claims.expiresAt > ClientTokenCodec.latestDate { fatalError("an expiry beyond the clamp") }
    guard let header = Base64.decode(parts[0], .url), let json = try? JSONParser.parse(header),
        json["alg"]?.stringValue == "HS256"
    else { fatalError("accepted a token whose header is not HS256") }
}
