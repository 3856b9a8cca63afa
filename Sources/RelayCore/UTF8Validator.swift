import WebSocketCodec

/// Strict UTF-8 validation (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
/// One implementation serves the JSON parser and WebSocket text frames: this is the codec's
/// incremental `UTF8Stream`, fed a whole buffer at once.
package enum UTF8Validator {
    package static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var stream = UTF8Stream()
        return stream.feed(bytes) && stream.isComplete
    }

    package static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isValid($0) }
    }
}
