import RelayCore

/// libFuzzer entry: the JSON parser and request decoding. Any bytes must parse or fail cleanly;
/// whatever parses must re-serialize to JSON that parses to the same value, and the UTF-8
/// validator must agree with the standard library's decoder.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let strictlyValid = UTF8Validator.isValid(bytes)
    let decodedCleanly = String(validating: bytes, as: UTF8.self) != nil
    if strictlyValid != decodedCleanly { fatalError("UTF-8 validator disagrees with the standard library") }
    guard let value = try? JSONParser.parse(bytes) else { return 0 }
    guard let again = try? JSONParser.parse(value.serialized), again == value else {
        fatalError("serialization does not round-trip")
    }
    if value.canonical.serialized != (try? JSONParser.parse(value.canonical.serialized))?.canonical.serialized {
        fatalError("canonical form is not stable")
    }
    _ = try? IncomingMessage(json: value, maxPayloadBytes: 4096, defaultTTLSeconds: 60)
    _ = try? FieldReader(value).identifierList("recipients", maxCount: 10)
    return 0
}
