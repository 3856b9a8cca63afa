import WebSocketCodec

/// libFuzzer entry: arbitrary bytes from a client, split at an arbitrary point, must never crash
/// the server-side state machine, and every failure must end in a valid close code.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocket(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let split = bytes.first.map { Int($0) % (bytes.count + 1) } ?? 0
    var connection = WebSocketConnection(role: .server, maxMessageSize: 4096)
    var outputs = connection.receive(bytes[..<split])
    outputs += connection.receive(bytes[split...])
    for output in outputs {
        if case .closed(let code, _) = output, code != CloseCode.noStatus, !CloseCode.isValidOnTheWire(code) {
            fatalError("invalid close code \(code)")  // the fuzzer's finding, not an input path
        }
    }
    // The same bytes in one piece must give the same outputs.
    var whole = WebSocketConnection(role: .server, maxMessageSize: 4096)
    let again = whole.receive(bytes)
    if again != outputs { fatalError("outputs depend on how the stream was split") }
    return 0
}
