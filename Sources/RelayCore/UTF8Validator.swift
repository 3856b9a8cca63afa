import RelayPrimitives

/// Strict UTF-8 validation (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
/// One implementation serves the JSON parser and WebSocket text frames: this is the codec's
/// incremental `UTF8Stream`, fed a whole buffer at once.
package enum UTF8Validator {
    package static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Most text is ASCII: skipped eight bytes at a time up to the first that is not (a code
        // point boundary), before the byte-wise state machine takes over.
        var ascii = 0
        if let base = UnsafeRawPointer(bytes.baseAddress) {
            while ascii + 8 <= bytes.count,
                base.loadUnaligned(fromByteOffset: ascii, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
            {
                ascii += 8
            }
        }
        var stream = UTF8Stream()
        return stream.feed(UnsafeBufferPointer(rebasing: bytes[ascii...])) && stream.isComplete
    }

    package static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isValid($0) }
    }
}
