import Glibc
import RelayLocks

/// What waits to go out on one upgraded socket, shared by the loop and the threads that send.
///
/// A sender writes its frames to the socket itself when the socket takes them: a live message
/// leaves from the thread that saw its commit become durable, with no hand-off to the loop and
/// no wake-up of it. What the socket does not take waits here, in order, for the loop: the
/// `EAGAIN` that left it here guarantees the edge epoll reports when the socket drains (bytes
/// that wait for another reason — a socket not registered yet, frames left to the loop — are
/// written by the loop's registration or its `flush` command). The descriptor is written and
/// closed only under the lock, so no sender writes to a closed one.
final class Outbound: Sendable {
    /// What became of a sender's frames.
    enum Sent {
        /// Written, or queued behind what the socket has not taken yet.
        case accepted
        /// Queued for the loop to write (`WebSocketHandle.Writer.loop`), which must be told.
        case handedOver
        /// The connection is closing or closed: dropped.
        case dropped
        /// They would take the queue past its bound: dropped; the loop closes the socket (1008).
        case overflow
        /// Writing failed: the loop ends the connection.
        case failed
    }

    /// Where a write left the queue.
    enum Flush {
        case drained
        /// The socket took part of it; the loop writes the rest when epoll says it drained.
        case pending
        case failed
    }

    private struct State {
        /// -1 until the loop registered the socket, and again once it closed it.
        var fd: Int32 = -1
        var bytes: [UInt8] = []
        var offset = 0
        /// Called when the queue next becomes empty.
        var onFlushed: [@Sendable () -> Void] = []
        /// False once a close began: senders' frames are dropped.
        var accepting = true
        /// The socket refused bytes (`EAGAIN`) and has not drained since: only then does what
        /// waits count against the bound (frames left to the loop wait without a stall).
        var stalled = false
        var queued: Int { bytes.count - offset }
    }

    private let state = LockedValue(State())

    /// Bytes the socket has not taken yet.
    var queuedBytes: Int { state.withLock { $0.queued } }

    /// From any thread: writes `frames` after whatever is queued, or with `write` false leaves
    /// them to the loop. A queue already holding bytes takes no more than `bound` in all (one
    /// batch always fits an empty one). `onFlushed` runs once they reached the socket, on the
    /// thread that wrote the last of them.
    func send(_ frames: [UInt8], bound: Int, write: Bool, onFlushed: (@Sendable () -> Void)? = nil) -> Sent {
        var callbacks: [@Sendable () -> Void] = []
        let sent = state.withLock { state -> Sent in
            guard state.accepting else { return .dropped }
            if state.stalled, state.queued + frames.count > bound {
                state.accepting = false
                return .overflow
            }
            // Bytes already waiting met a full socket (or one not registered yet): the loop writes
            // them, and these after them, when it drains.
            guard state.queued == 0 else {
                state.bytes += frames
                if let onFlushed { state.onFlushed.append(onFlushed) }
                return .accepted
            }
            state.bytes = frames
            if let onFlushed { state.onFlushed.append(onFlushed) }
            guard write else { return .handedOver }
            switch Self.write(&state, callbacks: &callbacks) {
            case .drained, .pending: return .accepted
            case .failed: return .failed
            }
        }
        for callback in callbacks { callback() }
        return sent
    }

    /// The loop's own frames (pongs, pings, its close): queued even while closing.
    func append(_ frame: [UInt8]) {
        state.withLock { $0.bytes += frame }
    }

    /// The loop writes what is queued (the socket was registered, or drained).
    func flush() -> Flush {
        var callbacks: [@Sendable () -> Void] = []
        let flush = state.withLock { Self.write(&$0, callbacks: &callbacks) }
        for callback in callbacks { callback() }
        return flush
    }

    /// The loop registered the socket: it may be written from now on.
    func attach(_ fd: Int32) {
        state.withLock { $0.fd = fd }
    }

    /// A close began: the frames of senders are dropped from now on.
    func stopAccepting() {
        state.withLock { $0.accepting = false }
    }

    /// Closes the socket, after which nothing is written (what was queued is dropped).
    func close(_ close: () -> Void) {
        state.withLock { state in
            state.fd = -1
            state.accepting = false
            state.bytes = []
            state.offset = 0
            state.onFlushed = []
            close()
        }
    }

    private static func write(_ state: inout State, callbacks: inout [@Sendable () -> Void]) -> Flush {
        let fd = state.fd
        guard fd >= 0 else { return .pending }  // (not registered yet: the loop writes it then)
        while state.queued > 0 {
            let offset = state.offset
            let count = state.queued
            let sent = state.bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress?.advanced(by: offset), count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                state.offset += sent
                continue
            }
            if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                state.stalled = true
                return .pending
            }
            if sent < 0, errno == EINTR { continue }
            state.accepting = false
            return .failed
        }
        // Give the buffer back: an idle socket should cost as little memory as possible.
        state.bytes = []
        state.offset = 0
        state.stalled = false
        callbacks = state.onFlushed
        state.onFlushed = []
        return .drained
    }
}
