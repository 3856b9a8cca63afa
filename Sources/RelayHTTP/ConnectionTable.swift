import Glibc
import RelayLocks

/// Every client connection from accept to close, HTTP and upgraded alike: the caps (global and
/// per client address) that decide whether a new one is accepted, and the deadlines that end a
/// connection whose client is too slow on purpose.
///
/// libmicrohttpd's own limits do not do this: its timeout is idle time *between* bytes (a client
/// trickling a byte a second is never idle), and it forgets a connection once it is upgraded to
/// a WebSocket. A connection must deliver its whole request head within `headerTimeoutMs` of
/// being accepted or of finishing its previous request (so an idle keep-alive connection is
/// closed after the same time), and a declared body within `bodyTimeoutMs` of its head. While a
/// handler works on a request there is no deadline: that wait is ours, not the client's.
final class ConnectionTable: Sendable {
    struct Limits: Sendable {
        var maxConnections: Int
        /// 0 for no cap.
        var maxPerAddress: Int
        var headerTimeoutMs: Int64
        var bodyTimeoutMs: Int64
    }

    private struct Entry {
        let fd: Int32
        let address: String
        /// Monotonic milliseconds; nil while a handler works on the request or after an upgrade.
        var deadline: Int64?
        /// False once the connection's place in the counts moved to its upgraded socket.
        var counted = true
        /// Between the head and the end of a declared body.
        var readingBody = false
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var perAddress: [String: Int] = [:]
        var total = 0
        var nextId: UInt64 = 1

        mutating func release(_ address: String) {
            total -= 1
            if let count = perAddress[address], count > 1 {
                perAddress[address] = count - 1
            } else {
                perAddress[address] = nil
            }
        }
    }

    let limits: Limits
    private let state = LockedValue(State())

    init(limits: Limits) { self.limits = limits }

    /// Whether a connection from `address` may be accepted now.
    func admits(_ address: String) -> Bool {
        state.withLock { state in
            guard state.total < limits.maxConnections else { return false }
            return limits.maxPerAddress == 0 || state.perAddress[address, default: 0] < limits.maxPerAddress
        }
    }

    /// A connection was accepted; returns its id (never 0).
    func opened(fd: Int32, address: String, now: Int64) -> UInt64 {
        state.withLock { state in
            let id = state.nextId
            state.nextId += 1
            state.entries[id] = Entry(fd: fd, address: address, deadline: now + limits.headerTimeoutMs)
            state.total += 1
            state.perAddress[address, default: 0] += 1
            return id
        }
    }

    /// The request head is in: a body to come gets its own deadline; otherwise none runs.
    func headReceived(_ id: UInt64, expectsBody: Bool, now: Int64) {
        setDeadline(id, expectsBody ? now + limits.bodyTimeoutMs : nil, readingBody: expectsBody)
    }

    /// The whole request is in; the handler runs.
    func requestReceived(_ id: UInt64) { setDeadline(id, nil, readingBody: false) }

    /// The answer went out: the next request's head must arrive in time.
    func requestCompleted(_ id: UInt64, now: Int64) {
        setDeadline(id, now + limits.headerTimeoutMs, readingBody: false)
    }

    private func setDeadline(_ id: UInt64, _ deadline: Int64?, readingBody: Bool) {
        state.withLock { state in
            guard state.entries[id]?.counted == true else { return }  // upgraded: the WebSocket's
            state.entries[id]?.deadline = deadline
            state.entries[id]?.readingBody = readingBody
        }
    }

    /// The connection became a WebSocket: it keeps its place in the counts until `release` is
    /// called (when the socket closes), although libmicrohttpd forgets it.
    func upgraded(_ id: UInt64) -> @Sendable () -> Void {
        let address = state.withLock { state -> String? in
            guard var entry = state.entries[id], entry.counted else { return nil }
            entry.counted = false
            entry.deadline = nil
            state.entries[id] = entry
            return entry.address
        }
        guard let address else { return {} }
        return { [self] in state.withLock { $0.release(address) } }
    }

    /// libmicrohttpd is done with the connection (it closes the descriptor right after).
    func closed(_ id: UInt64) {
        state.withLock { state in
            guard let entry = state.entries.removeValue(forKey: id) else { return }
            if entry.counted { state.release(entry.address) }
        }
    }

    /// Shuts down every connection past its deadline (libmicrohttpd then sees the end of the
    /// stream and closes it), and every one whose client hung up in the middle of a body (with
    /// edge-triggered epoll, libmicrohttpd misses an end of stream that came with the last bytes
    /// and would hold the request until its timeout); returns how many. Runs under the lock, so a
    /// descriptor is never touched after `closed` (libmicrohttpd notifies before it closes).
    @discardableResult
    func expire(now: Int64) -> Int {
        state.withLock { state in
            var expired = 0
            for (id, entry) in state.entries {
                guard let deadline = entry.deadline else { continue }
                guard now >= deadline || (entry.readingBody && Self.peerHungUp(entry.fd)) else { continue }
                shutdown(entry.fd, Int32(SHUT_RDWR))
                state.entries[id]?.deadline = nil
                expired += 1
            }
            return expired
        }
    }

    /// The peer closed its side and nothing is left to read.
    private static func peerHungUp(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    /// Open connections, WebSockets included.
    var count: Int { state.withLock { $0.total } }
}
