internal import CLinux
import Glibc
import Synchronization
import WebSocketCodec

/// Holds many WebSocket client connections on one epoll thread (the project's codec in client
/// role) and records, for every message carrying `"t":<monotonic ns>`, how long it took to
/// arrive.
final class SubscriberPool: @unchecked Sendable {
    final class Subscriber {
        let fd: Int32
        let key: String
        let request: [UInt8]
        var handshakeBuffer: [UInt8] = []
        var open = false
        var connection = WebSocketConnection(role: .client, maxMessageSize: 16 << 20)
        var pendingWrite: [UInt8]
        /// For MQTT over WebSocket: the topic to subscribe to, and the packet stream.
        let mqttTopic: String?
        var mqtt = MQTT.Parser()

        init(fd: Int32, key: String, request: [UInt8], mqttTopic: String?) {
            self.fd = fd
            self.key = key
            self.request = request
            self.mqttTopic = mqttTopic
            pendingWrite = request
        }
    }

    private let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
    private var subscribers: [Int32: Subscriber] = [:]
    private let latencies = Mutex<[Int64]>([])
    let openCount = Atomic<Int>(0)
    let closedCount = Atomic<Int>(0)
    let received = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private var thread = pthread_t()

    /// Opens `paths.count` connections (path per connection, e.g. with its token) to host:port.
    /// With `mqttTopics`, each connection speaks MQTT over the WebSocket and subscribes to its topic.
    func connect(host: String, port: UInt16, paths: [String], mqttTopics: [String]? = nil) throws {
        for (index, path) in paths.enumerated() {
            let fd = try Socket.connect(host: host, port: port, nonBlocking: true)
            let key = WebSocketHandshake.randomKey()
            let topic = mqttTopics?[index]
            let headers = topic == nil ? [] : [("Sec-WebSocket-Protocol", "mqtt")]
            let subscriber = Subscriber(
                fd: fd, key: key,
                request: WebSocketHandshake.clientRequest(
                    host: "\(host):\(port)", path: path, key: key, headers: headers),
                mqttTopic: topic)
            subscribers[fd] = subscriber
            var event = epoll_event()
            event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLET.rawValue
            event.data.fd = fd
            epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
        }
    }

    func start() {
        let box = Unmanaged.passRetained(self)
        pthread_create(
            &thread, nil,
            { pointer in
                guard let pointer else { return nil }
                Unmanaged<SubscriberPool>.fromOpaque(pointer).takeRetainedValue().run()
                return nil
            }, box.toOpaque())
    }

    func stop() {
        running.store(false, ordering: .releasing)
        pthread_join(thread, nil)
        for fd in subscribers.keys { close(fd) }
    }

    /// Takes the latencies recorded so far (nanoseconds).
    func drainLatencies() -> [Int64] {
        latencies.withLock { samples in
            defer { samples = [] }; return samples
        }
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while running.load(ordering: .acquiring) {
            let count = epoll_wait(epollFD, &events, Int32(events.count), 100)
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                guard let subscriber = subscribers[fd] else { continue }
                if events[index].events & EPOLLOUT.rawValue != 0 { flush(subscriber) }
                if events[index].events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    readAll(subscriber, &buffer)
                }
            }
        }
    }

    private func flush(_ subscriber: Subscriber) {
        while !subscriber.pendingWrite.isEmpty {
            let sent = subscriber.pendingWrite.withUnsafeBytes {
                send(subscriber.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            subscriber.pendingWrite.removeFirst(sent)
        }
    }

    private func readAll(_ subscriber: Subscriber, _ buffer: inout [UInt8]) {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(subscriber.fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            guard count > 0 else {
                subscribers[subscriber.fd] = nil
                epoll_ctl(epollFD, EPOLL_CTL_DEL, subscriber.fd, nil)
                close(subscriber.fd)
                if subscriber.open { openCount.subtract(1, ordering: .relaxed) }
                closedCount.add(1, ordering: .relaxed)
                return
            }
            let now = Clock.nowNanos()
            var bytes = Array(buffer[0..<count])
            if !subscriber.open {
                subscriber.handshakeBuffer += bytes
                guard let response = WebSocketHandshake.parseResponse(subscriber.handshakeBuffer) else { continue }
                guard WebSocketHandshake.accepts(response, key: subscriber.key) else {
                    closedCount.add(1, ordering: .relaxed)
                    subscribers[subscriber.fd] = nil
                    close(subscriber.fd)
                    return
                }
                subscriber.open = true
                openCount.add(1, ordering: .relaxed)
                bytes = response.rest
                if let topic = subscriber.mqttTopic {
                    subscriber.pendingWrite +=
                        subscriber.connection.binary(MQTT.connect(clientId: topic))
                        + subscriber.connection.binary(MQTT.subscribe(topic: topic))
                    flush(subscriber)
                }
            }
            for output in subscriber.connection.receive(bytes) {
                switch output {
                case .write(let frame):
                    subscriber.pendingWrite += frame
                    flush(subscriber)
                case .message(.text(let text)):
                    if let sent = Self.timestamp(in: text) {
                        received.add(1, ordering: .relaxed)
                        latencies.withLock { $0.append(now - sent) }
                    }
                case .message(.binary(let data)):
                    subscriber.mqtt.append(data)
                    while let packet = subscriber.mqtt.next() {
                        guard let publish = MQTT.parsePublish(type: packet.type, body: packet.body) else { continue }
                        if let ackId = publish.ackId {
                            subscriber.pendingWrite += subscriber.connection.binary(MQTT.puback(ackId))
                            flush(subscriber)
                        }
                        if let sent = Self.timestamp(in: String(decoding: publish.payload, as: UTF8.self)) {
                            received.add(1, ordering: .relaxed)
                            latencies.withLock { $0.append(now - sent) }
                        }
                    }
                case .pong, .closed:
                    break
                }
            }
        }
    }

    /// The integer after `"t":` in a frame (PushRelay puts the payload inside its envelope;
    /// nchan and MQTT deliver it bare).
    static func timestamp(in text: String) -> Int64? {
        guard let range = text.utf8.firstRange(of: Array(#""t":"#.utf8)) else { return nil }
        var value: Int64 = 0
        var index = range.upperBound
        var digits = 0
        while index < text.utf8.endIndex, let digit = text.utf8[index].asciiDigit {
            value = value * 10 + Int64(digit)
            digits += 1
            index = text.utf8.index(after: index)
        }
        return digits > 0 ? value : nil
    }
}

extension UInt8 {
    var asciiDigit: UInt8? { self >= 48 && self <= 57 ? self - 48 : nil }
}

enum Clock {
    static func nowNanos() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
