internal import CPostgres
import Foundation
import Glibc
package import RelayCore
import RelayLocks

/// What a node hears from the others of its cluster (`RelayStore.observeCluster`).
package struct ClusterObserver: Sendable {
    /// Another node committed `seq` to `userId`'s inbox.
    package var committed: @Sendable (_ userId: String, _ seq: Int64) -> Void
    /// A device went online or offline on another node.
    package var presence: @Sendable (_ nodeId: String, _ userId: String, _ deviceId: String, _ online: Bool) -> Void
    /// Another node's devices count as online until then.
    package var lease: @Sendable (_ nodeId: String, _ until: Timestamp) -> Void
    /// A device was deleted on another node: its tokens up to `atSeconds` are revoked.
    package var revoked: @Sendable (_ userId: String, _ deviceId: String, _ atSeconds: Int64) -> Void
    /// Another node wrote something (`.jobs`: push or event jobs may be due), or this node became
    /// the one that delivers (`.jobs`).
    package var changed: @Sendable (WriteEffect) -> Void
    /// Notifications may have been missed (the listening connection was lost): every session
    /// reads its inbox again.
    package var resync: @Sendable () -> Void

    package init(
        committed: @escaping @Sendable (_ userId: String, _ seq: Int64) -> Void,
        presence: @escaping @Sendable (_ nodeId: String, _ userId: String, _ deviceId: String, _ online: Bool) -> Void,
        lease: @escaping @Sendable (_ nodeId: String, _ until: Timestamp) -> Void,
        revoked: @escaping @Sendable (_ userId: String, _ deviceId: String, _ atSeconds: Int64) -> Void,
        changed: @escaping @Sendable (WriteEffect) -> Void, resync: @escaping @Sendable () -> Void
    ) {
        self.committed = committed
        self.presence = presence
        self.lease = lease
        self.revoked = revoked
        self.changed = changed
        self.resync = resync
    }
}

/// A node's two standing connections to the others, through PostgreSQL:
///
/// - **Commits.** Every write transaction ends with `pg_notify('pushrelay', payload)`: the
///   writing node's id, then one line per `ClusterNote` (message entries committed, devices gone
///   online or offline, the node's lease renewed). Each node
///   `LISTEN`s on its own connection and hands the others' lines to the sessions it holds. When
///   that connection is lost, notifications may have been missed: once it is back, every
///   session reads its inbox again (the gap-fill by seq makes that exact).
/// - **Delivery.** One node at a time delivers pushes and events and prunes: the one whose
///   connection of its own holds the lock of the view `delivery_lease`, in a transaction left
///   open. A node that dies (or loses that connection) loses the lock with its session, and a
///   waiting node takes over at once; one that stops running with its connection open (stopped,
///   hung, paused) stops touching its session, which the server ends after the node lease
///   (`HeldLease`);
///   its jobs were never marked claimed, so nothing is stranded. Delivery is thus not spread over
///   nodes, but coalescing and "no seq pushed twice" hold cluster-wide by construction.
///
/// Both threads block in `poll` (no timer): an idle cluster does not wake up.
package final class PostgresCluster: Sendable {
    static let channel = "pushrelay"
    let nodeId: String
    private let uri: String
    private let observer = LockedValue<ClusterObserver?>(nil)
    private let lease: LockedValue<HeldLease>
    /// Written to stop both threads; read ends polled beside the sockets.
    private let stopPipe: (read: Int32, write: Int32)
    private let running = LockedValue(0)

    init(uri: String, nodeId: String, leaseMilliseconds: Int64) {
        self.uri = uri
        self.nodeId = nodeId
        lease = LockedValue(HeldLease(leaseMilliseconds: leaseMilliseconds))
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        stopPipe = (fds[0], fds[1])
    }

    deinit {
        close(stopPipe.read)
        close(stopPipe.write)
    }

    /// Whether this node holds the delivery lease now.
    var isLeader: Bool { lease.withLock { $0.holds(at: MonotonicClock.milliseconds()) } }

    func start() {
        spawn("relay-listen") { [self] in listen() }
        spawn("relay-lease") { [self] in holdLease() }
    }

    private func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        running.withLock { $0 += 1 }
        let started = ServiceThread.start(name) { [self] in
            body()
            running.withLock { $0 -= 1 }
            running.broadcast()
        }
        if started == nil { running.withLock { $0 -= 1 } }
    }

    func observe(_ observer: ClusterObserver) { self.observer.withLock { $0 = observer } }

    func stop() {
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
        running.withLock(when: { $0 == 0 }) { _ in }
    }

    // MARK: Commits

    private func listen() {
        var missed = false
        while let connection = connect(then: "LISTEN \(Self.channel)") {
            if missed { observer.withLock { $0 }?.resync() }
            missed = true  // from here on, a lost connection may lose notifications
            while wait(for: connection) {
                guard PQconsumeInput(connection.handle) != 0 else { break }
                while let notification = PQnotifies(connection.handle) {
                    let payload = PostgresConnection.text(notification.pointee.extra)
                    PQfreemem(notification)
                    receive(payload)
                }
                if connection.isBroken { break }
            }
            if stopped { return }
        }
    }

    private func receive(_ payload: String) {
        var lines = payload.split(separator: "\n", omittingEmptySubsequences: false)[...]
        guard let sender = lines.popFirst(), sender != nodeId, let observer = observer.withLock({ $0 }) else { return }
        let node = String(sender)
        var effect = WriteEffect.data
        for line in lines {
            switch ClusterNote(line: line) {
            case .committed(let userId, let seq): observer.committed(userId, seq)
            case .presence(let userId, let deviceId, let online): observer.presence(node, userId, deviceId, online)
            case .lease(let until): observer.lease(node, until)
            case .revoked(let userId, let deviceId, let seconds): observer.revoked(userId, deviceId, seconds)
            case .jobs: effect = .jobs
            case nil: continue
            }
        }
        observer.changed(effect)
    }

    // MARK: Delivery lease

    private func holdLease() {
        // The holder's transaction stays open for as long as it delivers: only its silence for a
        // whole lease may end it (`hold`).
        let settings = """
            SET idle_in_transaction_session_timeout = \(lease.withLock { $0.leaseMilliseconds });
            SET lock_timeout = 0; SET statement_timeout = 0;
            SELECT FROM delivery_lease LIMIT 0
            """
        while let connection = connect(then: settings) {
            // Blocks in the server until the holder's session ends. A table lock, not an advisory
            // lock: waiting in `LOCK` holds no snapshot, while a `SELECT pg_advisory_lock(…)`
            // waiting for hours would hold back the cleanup of every dead row in the database
            // (each update of an inbox's head leaves one) for as long.
            let lock = "BEGIN; LOCK TABLE delivery_lease IN EXCLUSIVE MODE"
            guard PQsendQuery(connection.handle, lock) != 0 else { continue }
            var answered = false
            var granted = true
            while !answered, wait(for: connection), PQconsumeInput(connection.handle) != 0 {
                while PQisBusy(connection.handle) == 0 {
                    guard let result = PQgetResult(connection.handle) else {
                        answered = true
                        break
                    }
                    if PQresultStatus(result) != PGRES_COMMAND_OK { granted = false }
                    PQclear(result)
                }
            }
            granted = granted && answered
            if granted {
                hold(connection)
                lease.withLock { $0.lost() }
            } else {
                pause(milliseconds: 1000)  // refused (not merely lost): do not ask again at once
            }
            if stopped { return }
        }
    }

    /// Holds the granted lease until its session ends (or the node stops), touching the session
    /// every third of the lease: the server ends it after a whole lease without a word.
    private func hold(_ connection: PostgresConnection) {
        var touch = true  // at once: the grant may answer a request sent long ago
        while !connection.isBroken {
            if touch {
                guard PQsendQuery(connection.handle, "SELECT 1") != 0 else { return }
                lease.withLock { $0.sent(at: MonotonicClock.milliseconds()) }
            }
            let due = lease.withLock { $0.nextTouch }
            switch wait(for: connection, untilMonotonic: due) {
            case .stopped:
                return
            case .timedOut:
                touch = true
            case .input:
                touch = false
                guard PQconsumeInput(connection.handle) != 0 else { return }
                while PQisBusy(connection.handle) == 0 {
                    guard let result = PQgetResult(connection.handle) else {
                        // The touch's results are all in (or nothing was asked: then this is a no-op).
                        let gained = lease.withLock { $0.answered(now: MonotonicClock.milliseconds()) }
                        if gained { observer.withLock { $0 }?.changed(.jobs) }
                        break
                    }
                    let fine = PQresultStatus(result) == PGRES_TUPLES_OK
                    PQclear(result)
                    guard fine else { return }  // e.g. the session was ended
                }
            }
        }
    }

    // MARK: Connections

    private var stopped: Bool {
        var pollfd = Glibc.pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)
        return poll(&pollfd, 1, 0) > 0
    }

    /// Connects (and runs `statement`), retrying with backoff until it works; nil once stopped.
    private func connect(then statement: String?) -> PostgresConnection? {
        var delay: Int32 = 100
        while !stopped {
            if let connection = try? PostgresConnection(uri: uri) {
                do {
                    if let statement { try connection.execute(statement) }
                    return connection
                } catch {}
            }
            pause(milliseconds: delay)
            delay = min(delay * 2, 2000)
        }
        return nil
    }

    /// Sleeps, unless stopped meanwhile.
    private func pause(milliseconds: Int32) {
        var pollfd = Glibc.pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)
        _ = poll(&pollfd, 1, milliseconds)
    }

    /// Waits until the connection has input; false when stopping.
    private func wait(for connection: PostgresConnection) -> Bool {
        wait(for: connection, untilMonotonic: nil) == .input
    }

    private enum Wake { case input, timedOut, stopped }

    /// Waits until the connection has input, the monotonic time `deadline` (milliseconds; nil:
    /// none) passes, or the node stops.
    private func wait(for connection: PostgresConnection, untilMonotonic deadline: Int64?) -> Wake {
        guard connection.socket >= 0 else { return .input }  // lost: the caller's next read fails
        var fds = [
            pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let timeout = deadline.map { Int32(clamping: max(0, $0 - MonotonicClock.milliseconds())) } ?? -1
            let ready = poll(&fds, 2, timeout)
            if ready < 0, errno == EINTR { continue }
            if fds[1].revents != 0 { return .stopped }
            return ready > 0 ? .input : .timedOut
        }
    }
}
