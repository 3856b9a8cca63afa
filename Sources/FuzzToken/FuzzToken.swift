import RelayCore

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
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let codec = ClientTokenCodec(hmac: { toyMAC($0) }, leeway: 0)
    let now: Int64 = 1_800_000_000
    _ = Base64URL.decode(text)
    guard let claims = try? codec.verify(text, now: now) else { return 0 }
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    let signingInput = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    if Base64URL.decode(parts[2]) != toyMAC(signingInput) { fatalError("accepted a token with a wrong signature") }
    if claims.userId.isEmpty || claims.expiresAt <= now { fatalError("accepted a token without subject or expiry") }
    guard let header = Base64URL.decode(parts[0]), let json = try? JSONParser.parse(header),
        json["alg"]?.stringValue == "HS256"
    else { fatalError("accepted a token whose header is not HS256") }
    return 0
}
