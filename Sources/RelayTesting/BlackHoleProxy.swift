import Foundation
import RelayLocks

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on `127.0.0.1` in front of a relay that can make the connections open at a moment
/// go silent for good — no FIN, no RST, nothing forwarded either way — while new connections pass:
/// what a phone sees when a NAT forgets its mapping.
package final class BlackHoleProxy: Sendable {
    /// One proxied connection: its sockets, whether it still forwards, how many pumps ended.
    private struct Pair {
        let client: Int32
        let relay: Int32
        var forwards = true
        var pumpsEnded = 0
    }

    private struct State {
        var pairs: [Int: Pair] = [:]
        var nextId = 0
        var stopped = false
    }

    package let port: Int
    private let target: Int
    private let listener: Int32
    private let state = LockedValue(State())

    /// A proxy forwarding to `127.0.0.1:target`.
    package init(target: Int) throws {
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            Glibc.close(listener)
            throw RawConnection.Failure(description: "proxy cannot listen")
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// The connections open now stop forwarding and stay open; later ones pass.
    package func blackHoleOpenConnections() {
        state.withLock { state in
            for id in state.pairs.keys { state.pairs[id]?.forwards = false }
        }
    }

    /// Closes the listener and every connection (under the lock, so that no pump closes a
    /// socket meanwhile).
    package func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for pair in state.pairs.values {
                shutdown(pair.client, Int32(SHUT_RDWR))
                shutdown(pair.relay, Int32(SHUT_RDWR))
            }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { break }
            guard let relay = try? RawConnection.connect(port: target) else {
                Glibc.close(client)
                continue
            }
            let id = state.withLock { state in
                let id = state.nextId
                state.nextId += 1
                state.pairs[id] = Pair(client: client, relay: relay)
                if state.stopped {
                    shutdown(client, Int32(SHUT_RDWR))
                    shutdown(relay, Int32(SHUT_RDWR))
                }
                return id
            }
            Thread.detachNewThread { [self] in pump(id, from: client, to: relay) }
            Thread.detachNewThread { [self] in pump(id, from: relay, to: client) }
        }
        Glibc.close(listener)
    }

    /// Copies bytes one way while the pair forwards; afterwards reads and drops them.
    private func pump(_ id: Int, from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            guard state.withLock({ $0.pairs[id]?.forwards ?? false }) else { continue }
            var offset = 0
            while offset < count {
                let sent = buffer[offset..<count].withUnsafeBytes {
                    send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard sent > 0 else { break }
                offset += sent
            }
        }
        let (forwards, finished): (Bool, Pair?) = state.withLock { state in
            guard var pair = state.pairs[id] else { return (false, nil) }
            pair.pumpsEnded += 1
            state.pairs[id] = pair.pumpsEnded == 2 ? nil : pair
            return (pair.forwards, pair.pumpsEnded == 2 ? pair : nil)
        }
        // Only a forwarding pair passes a close on: a black-holed one stays silent.
        if forwards { shutdown(destination, Int32(SHUT_WR)) }
        if let finished {
            Glibc.close(finished.client)
            Glibc.close(finished.relay)
        }
    }
}
