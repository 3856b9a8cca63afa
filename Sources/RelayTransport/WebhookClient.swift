import Foundation
package import RelayCore
import RelayLocks
package import RelayPoll
import Synchronization

/// The HTTP/1.1 client for webhook POSTs, plain or TLS (OpenSSL): one thread and one epoll
/// drive every delivery in flight on non-blocking sockets, with keep-alive connections pooled
/// per (scheme, host, port, address).
///
/// A receiver that is slow, hung or trickling holds a socket, not a thread: hundreds of
/// deliveries can wait on far-away gateways at once, and a pooled request costs one `send`, one
/// `recv` and a share of one `epoll_wait`. (The first version ran a blocking exchange per
/// thread: two context switches per push and a concurrency bounded by the thread count;
/// URLSession before it managed ~214 pushes/s here. Measurements in BENCHMARKS.md.)
///
/// An attempt has one wall-clock deadline (`totalTimeoutMs`) for connect (at most
/// `connectTimeoutMs` per address), TLS handshake, send, status line and body together: a
/// receiver that trickles its answer a byte a second fails like one that never answers. Only
/// `ResponseParser.maxBodyBytes` of an answer's body are read. It connects to the exact
/// addresses the SSRF guard checked (each in turn until one answers), so a DNS answer cannot
/// change between the check and the connection — for https too, where the certificate is
/// checked against the URL's host name.
///
/// `@unchecked Sendable`: `post` and `stop` may be called from any thread (the inbox is
/// locked, the poller's wake is thread-safe); every other property belongs to the loop thread.
package final class WebhookClient: @unchecked Sendable {
    package typealias Response = ResponseParser.Response

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    private struct Request {
        let url: PushURL
        let addresses: [IPAddress]
        let bytes: [UInt8]
        let deadline: Int64
        let done: @Sendable (Result<Response, Failure>) -> Void
    }

    /// One request on its way through a connection.
    private final class Exchange {
        enum Phase {
            case connecting(until: Int64)
            case handshaking
            case sending(offset: Int)
            case receiving
        }

        let request: Request
        let connection: WireConnection
        let addressIndex: Int
        /// The connection came from the pool: the peer may have closed it meanwhile, so a
        /// failure before any answer is retried once on a fresh connection.
        let reused: Bool
        var phase: Phase
        var interest: Poller.Interest
        var parser = ResponseParser()
        var heardBack = false

        init(
            _ request: Request, _ connection: WireConnection, addressIndex: Int, reused: Bool, phase: Phase,
            interest: Poller.Interest
        ) {
            self.request = request
            self.connection = connection
            self.addressIndex = addressIndex
            self.reused = reused
            self.phase = phase
            self.interest = interest
        }

        /// When the loop must act if nothing happens.
        var dueAt: Int64 {
            if case .connecting(let until) = phase { return until }
            return request.deadline
        }
    }

    private enum Slot {
        case idle(WireConnection)
        case busy(Exchange)
    }

    let connectTimeoutMs: Int
    let totalTimeoutMs: Int
    private let maxIdlePerAddress: Int
    private let tls: TLSContext
    private let poller: Poller
    private let inbox = LockedValue<[Request]>([])
    private let running = Atomic<Bool>(true)
    private let finished = LockedValue(false)

    // The loop thread's own state.
    private var slots: [Int32: Slot] = [:]
    private var idle: [String: [WireConnection]] = [:]
    /// When each pooled connection went idle (by fd): closed `maxIdleMs` after, so that receivers
    /// are not left holding sockets nobody will use (3×64 sat open for good).
    private var idleSince: [Int32: Int64] = [:]
    /// The earliest time an idle connection is due to close (or later).
    private var nextIdleClose = Int64.max
    private let maxIdleMs: Int64
    /// The earliest `dueAt` among exchanges (or later: a stale value only costs an early look).
    private var nextCheck = Int64.max
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16_384, alignment: 8)

    package init(
        tls: TLSContext, connectTimeoutMs: Int = 5000, totalTimeoutMs: Int = 10_000, maxIdlePerAddress: Int = 64,
        maxIdleMs: Int64 = WebhookClient.defaultMaxIdleMs
    ) throws(Poller.Failure) {
        self.tls = tls
        self.maxIdleMs = maxIdleMs
        self.connectTimeoutMs = connectTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        self.maxIdlePerAddress = maxIdlePerAddress
        poller = try Poller()
        ServiceThread.start("relay-webhooks") { [self] in run() }
    }

    deinit { readBuffer.deallocate() }

    /// How long a keep-alive connection stays pooled unused: shorter than common servers' own
    /// keep-alive (nginx 75 s, Node 5 s is shorter: a reuse it closed meanwhile is sent again).
    package static let defaultMaxIdleMs: Int64 = 30_000

    /// POSTs `body` to `url`, connecting to the first of `addresses` (already resolved and
    /// checked) that accepts a connection (and, for https, completes the handshake). `done`
    /// runs on the client's thread: it must not block.
    package func post(
        _ url: PushURL, addresses: [IPAddress], headers: [(String, String)], body: [UInt8],
        done: @escaping @Sendable (Result<Response, Failure>) -> Void
    ) {
        var head = "POST \(url.target) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let request = Request(
            url: url, addresses: addresses, bytes: Array(head.utf8) + body,
            deadline: MonotonicClock.milliseconds() + Int64(totalTimeoutMs), done: done)
        // A wake is pending while the inbox is not empty: the loop empties it after each wait.
        let wasEmpty = inbox.withLock { inbox in
            defer { inbox.append(request) }
            return inbox.isEmpty
        }
        if wasEmpty { poller.wake() }
    }

    /// Ends the thread; deliveries in flight are dropped without an answer (their jobs stay
    /// pending in the store and are sent again after the restart).
    package func stop() {
        running.store(false, ordering: .releasing)
        poller.wake()
        finished.withLock(when: { $0 }) { _ in }
    }

    // MARK: The loop

    private func run() {
        while running.load(ordering: .acquiring) {
            let now = MonotonicClock.milliseconds()
            // Nothing in flight or pooled: sleep until a post wakes the loop (no idle wake-ups).
            let wakeAt = min(nextCheck, nextIdleClose)
            let timeout = wakeAt == .max ? -1 : Int32(min(60_000, max(0, wakeAt - now)))
            guard poller.wait(timeoutMs: timeout, { event in handle(event) }) else { break }
            for request in inbox.withLock({ inbox in
                defer { inbox.removeAll(keepingCapacity: true) }; return inbox
            }) {
                start(request)
            }
            let later = MonotonicClock.milliseconds()
            if later >= nextCheck { expire(later) }
            if later >= nextIdleClose { closeIdle(later) }
        }
        slots.removeAll()
        idle.removeAll()
        idleSince.removeAll()
        finished.withLock { $0 = true }
        finished.broadcast()
    }

    private func handle(_ event: Poller.Event) {
        poller.assertOnLoopThread()
        let fd = Int32(truncatingIfNeeded: event.token - 1)
        switch slots[fd] {
        case .idle(let connection)?:
            // An idle keep-alive connection is readable only when its peer closed it (or sent
            // something it should not have): either way it is done.
            guard event.readable else { return }
            idle[connection.key]?.removeAll { $0 === connection }
            idleSince[connection.fd] = nil
            retire(connection)
        case .busy(let exchange)?:
            advance(exchange)
        case nil:
            break
        }
    }

    private func start(_ request: Request) {
        for (index, address) in request.addresses.enumerated() {
            guard let connection = idle[Self.key(request.url, address)]?.popLast() else { continue }
            idleSince[connection.fd] = nil
            let exchange = Exchange(
                request, connection, addressIndex: index, reused: true, phase: .sending(offset: 0),
                interest: .readable)
            slots[connection.fd] = .busy(exchange)
            nextCheck = min(nextCheck, exchange.dueAt)
            advance(exchange)
            return
        }
        open(request, from: 0, lastFailure: "no address to connect to")
    }

    /// Connects to the first address from `index` on that takes the connection attempt.
    private func open(_ request: Request, from index: Int, lastFailure: String) {
        var failure = lastFailure
        var index = index
        while index < request.addresses.count {
            let address = request.addresses[index]
            switch Socket.connect(address, port: request.url.port) {
            case .failure(let error):
                failure = error.description
                index += 1
                continue
            case .success(let (fd, inProgress)):
                let connection = WireConnection(fd: fd, key: Self.key(request.url, address))
                let now = MonotonicClock.milliseconds()
                let phase: Exchange.Phase =
                    inProgress ? .connecting(until: min(request.deadline, now + Int64(connectTimeoutMs))) : .handshaking
                let exchange = Exchange(
                    request, connection, addressIndex: index, reused: false, phase: phase, interest: .writable)
                guard poller.add(fd, token: UInt64(fd) + 1, interest: .writable) else {
                    failure = "epoll_ctl failed: \(String(cString: strerror(errno)))"
                    index += 1
                    continue
                }
                slots[fd] = .busy(exchange)
                nextCheck = min(nextCheck, exchange.dueAt)
                if !inProgress { startTLSIfNeeded(exchange) }
                return
            }
        }
        request.done(.failure(Failure(description: failure)))
    }

    /// Drives an exchange as far as its socket allows without waiting.
    private func advance(_ exchange: Exchange) {
        let connection = exchange.connection
        while true {
            switch exchange.phase {
            case .connecting:
                let error = Socket.pendingError(connection.fd)
                guard error == 0 else {
                    return nextAddress(exchange, "connect failed: \(String(cString: strerror(error)))")
                }
                exchange.phase = .handshaking
                return startTLSIfNeeded(exchange)
            case .handshaking:
                switch connection.handshake() {
                case .done: exchange.phase = .sending(offset: 0)
                case .wouldBlock(let wantsWrite): return watch(exchange, wantsWrite ? .writable : .readable)
                case .closed: return nextAddress(exchange, "TLS handshake failed: connection closed")
                case .failed(let reason): return nextAddress(exchange, reason)
                }
            case .sending(let offset):
                switch connection.send(exchange.request.bytes[offset...]) {
                case .done(let count):
                    let sent = offset + count
                    exchange.phase = sent == exchange.request.bytes.count ? .receiving : .sending(offset: sent)
                case .wouldBlock(let wantsWrite): return watch(exchange, wantsWrite ? .writable : .readable)
                case .closed: return failOrRetry(exchange, "connection closed")
                case .failed(let reason): return failOrRetry(exchange, reason)
                }
            case .receiving:
                switch connection.receive(into: readBuffer) {
                case .done(let count):
                    exchange.heardBack = true
                    switch exchange.parser.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])) {
                    case .needMore: continue
                    case .complete(let response, let keepAlive):
                        return complete(exchange, .success(response), keepConnection: keepAlive)
                    case .malformed(let reason):
                        return complete(exchange, .failure(Failure(description: reason)), keepConnection: false)
                    }
                case .wouldBlock(let wantsWrite): return watch(exchange, wantsWrite ? .writable : .readable)
                case .closed: return failOrRetry(exchange, "connection closed before the response")
                case .failed(let reason): return failOrRetry(exchange, reason)
                }
            }
        }
    }

    private func startTLSIfNeeded(_ exchange: Exchange) {
        if exchange.request.url.scheme == "https" {
            do {
                try exchange.connection.startTLS(tls, host: exchange.request.url.host)
            } catch {
                return nextAddress(exchange, error.description)
            }
        } else {
            exchange.phase = .sending(offset: 0)
        }
        advance(exchange)
    }

    private func watch(_ exchange: Exchange, _ interest: Poller.Interest) {
        guard exchange.interest != interest else { return }
        let fd = exchange.connection.fd
        exchange.interest = interest
        if !poller.modify(fd, token: UInt64(fd) + 1, interest: interest) {
            failOrRetry(exchange, "epoll_ctl failed: \(String(cString: strerror(errno)))")
        }
    }

    /// The connection to this address failed before the request went out: the next address.
    private func nextAddress(_ exchange: Exchange, _ reason: String) {
        retire(exchange.connection)
        open(exchange.request, from: exchange.addressIndex + 1, lastFailure: reason)
    }

    private func failOrRetry(_ exchange: Exchange, _ reason: String) {
        retire(exchange.connection)
        if exchange.reused && !exchange.heardBack {
            open(exchange.request, from: 0, lastFailure: reason)
        } else {
            exchange.request.done(.failure(Failure(description: reason)))
        }
    }

    private func complete(_ exchange: Exchange, _ result: Result<Response, Failure>, keepConnection: Bool) {
        let connection = exchange.connection
        if keepConnection, idle[connection.key, default: []].count < maxIdlePerAddress {
            slots[connection.fd] = .idle(connection)
            idle[connection.key, default: []].append(connection)
            if exchange.interest != .readable,
                !poller.modify(connection.fd, token: UInt64(connection.fd) + 1, interest: .readable)
            {
                idle[connection.key]?.removeLast()
                retire(connection)
            } else {
                let now = MonotonicClock.milliseconds()
                idleSince[connection.fd] = now
                nextIdleClose = min(nextIdleClose, now + maxIdleMs)
            }
        } else {
            retire(connection)
        }
        exchange.request.done(result)
    }

    /// Forgets a connection; it closes when the last reference goes.
    private func retire(_ connection: WireConnection) {
        poller.remove(connection.fd)
        slots[connection.fd] = nil
    }

    /// Closes the pooled connections idle for `maxIdleMs`.
    private func closeIdle(_ now: Int64) {
        var next = Int64.max
        for (key, connections) in idle {
            var kept: [WireConnection] = []
            for connection in connections {
                let since = idleSince[connection.fd] ?? now
                if since + maxIdleMs <= now {
                    idleSince[connection.fd] = nil
                    retire(connection)
                } else {
                    kept.append(connection)
                    next = min(next, since + maxIdleMs)
                }
            }
            idle[key] = kept.isEmpty ? nil : kept
        }
        nextIdleClose = next
    }

    /// Fails what is past its deadline (a connect past its own moves on to the next address).
    private func expire(_ now: Int64) {
        var next = Int64.max
        var late: [Exchange] = []
        for case .busy(let exchange) in slots.values {
            if exchange.dueAt <= now { late.append(exchange) } else { next = min(next, exchange.dueAt) }
        }
        nextCheck = next
        for exchange in late {
            if case .connecting = exchange.phase, exchange.request.deadline > now {
                nextAddress(exchange, "connect timed out")
            } else {
                retire(exchange.connection)
                exchange.request.done(.failure(Failure(description: "timed out")))
            }
        }
    }

    private static func key(_ url: PushURL, _ address: IPAddress) -> String {
        "\(url.scheme)://\(url.host):\(url.port)@\(address.text)"
    }
}

extension IPAddress {
    /// Textual form, for pool keys and logs.
    package var text: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}
