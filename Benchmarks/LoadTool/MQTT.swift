import Glibc

/// Just enough MQTT 3.1.1 to measure mosquitto as a peer: CONNECT, SUBSCRIBE, PUBLISH (QoS 1),
/// PUBACK, and a stream parser for what the broker sends.
enum MQTT {
    static func remainingLength(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var x = value
        repeat {
            var byte = UInt8(x % 128)
            x /= 128
            if x > 0 { byte |= 0x80 }
            bytes.append(byte)
        } while x > 0
        return bytes
    }

    static func string(_ text: String) -> [UInt8] {
        let utf8 = Array(text.utf8)
        return [UInt8(utf8.count >> 8), UInt8(utf8.count & 0xFF)] + utf8
    }

    static func packet(_ type: UInt8, _ body: [UInt8]) -> [UInt8] { [type] + remainingLength(body.count) + body }

    /// CONNECT with a persistent session (clean session off), so that QoS 1 messages are kept
    /// for a client that is away — the same promise PushRelay makes.
    static func connect(clientId: String, persistent: Bool = true) -> [UInt8] {
        packet(0x10, string("MQTT") + [4, persistent ? 0x00 : 0x02, 0, 60] + string(clientId))
    }

    static func subscribe(topic: String, packetId: UInt16 = 1) -> [UInt8] {
        packet(0x82, [UInt8(packetId >> 8), UInt8(packetId & 0xFF)] + string(topic) + [1])
    }

    static func publish(topic: String, payload: [UInt8], packetId: UInt16) -> [UInt8] {
        packet(0x32, string(topic) + [UInt8(packetId >> 8), UInt8(packetId & 0xFF)] + payload)
    }

    static func puback(_ packetId: [UInt8]) -> [UInt8] { [0x40, 0x02] + packetId }

    /// Splits a byte stream into packets.
    struct Parser {
        private var buffer: [UInt8] = []

        mutating func append(_ bytes: [UInt8]) { buffer += bytes }

        /// The next whole packet: its first byte and its body.
        mutating func next() -> (type: UInt8, body: [UInt8])? {
            guard buffer.count >= 2 else { return nil }
            var length = 0
            var multiplier = 1
            var index = 1
            while true {
                guard index < buffer.count, index <= 4 else { return nil }
                let byte = buffer[index]
                length += Int(byte & 0x7F) * multiplier
                multiplier *= 128
                index += 1
                if byte & 0x80 == 0 { break }
            }
            guard buffer.count >= index + length else { return nil }
            let packet = (buffer[0], Array(buffer[index..<index + length]))
            buffer.removeFirst(index + length)
            return packet
        }
    }

    /// A PUBLISH body: the payload, and the packet id to acknowledge when QoS is 1.
    static func parsePublish(type: UInt8, body: [UInt8]) -> (payload: [UInt8], ackId: [UInt8]?)? {
        guard type & 0xF0 == 0x30, body.count >= 2 else { return nil }
        let topicLength = Int(body[0]) << 8 | Int(body[1])
        var offset = 2 + topicLength
        var ackId: [UInt8]?
        if (type >> 1) & 0x03 > 0 {
            guard body.count >= offset + 2 else { return nil }
            ackId = Array(body[offset..<offset + 2])
            offset += 2
        }
        guard body.count >= offset else { return nil }
        return (Array(body[offset...]), ackId)
    }
}

/// A blocking MQTT publisher over TCP (QoS 1: each PUBLISH waits for its PUBACK, as each
/// PushRelay POST waits for its 202).
final class MQTTPublisher {
    private let fd: Int32
    private var parser = MQTT.Parser()
    private var nextId: UInt16 = 1

    init(host: String, port: UInt16, clientId: String) throws {
        fd = try Socket.connect(host: host, port: port, nonBlocking: false)
        try Socket.writeAll(fd, MQTT.connect(clientId: clientId, persistent: false))
        _ = try waitFor(0x20)
    }

    deinit { close(fd) }

    func publish(topic: String, payload: [UInt8]) throws {
        nextId = nextId == UInt16.max ? 1 : nextId + 1
        try Socket.writeAll(fd, MQTT.publish(topic: topic, payload: payload, packetId: nextId))
        _ = try waitFor(0x40)
    }

    private func waitFor(_ type: UInt8) throws -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let packet = parser.next(), packet.type & 0xF0 == type { return packet.body }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw HTTPClient.Failure(description: "mqtt connection closed") }
            parser.append(Array(chunk[0..<count]))
        }
    }
}
