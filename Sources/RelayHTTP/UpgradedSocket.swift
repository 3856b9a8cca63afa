internal import CMicroHTTPD
import Glibc
import Synchronization

/// A socket libmicrohttpd handed over after a `101 Switching Protocols` answer, now owned by us.
///
/// libmicrohttpd keeps a connection record and its whole memory pool (the request head buffer)
/// for as long as an upgraded socket is open — most of what an idle WebSocket would cost. So
/// the socket is `dup`ed and MHD's side is finished at once with `MHD_upgrade_action(CLOSE)`
/// (never a bare `close()` of MHD's descriptor, which leaks its record); MHD closes its
/// descriptor and frees the record, and the connection lives on in ours. `close()` ends it.
package final class UpgradedSocket: Sendable {
    /// Non-blocking; belongs to this object until `close()`.
    package let fd: Int32
    /// Bytes MHD read past the request head (the client's first frames); process them first.
    package let extraInput: [UInt8]
    private let closed = Atomic<Bool>(false)
    /// Gives the connection's place in the connection caps back.
    private let release: @Sendable () -> Void

    init(fd: Int32, extraInput: [UInt8], release: @escaping @Sendable () -> Void) {
        self.fd = fd
        self.extraInput = extraInput
        self.release = release
    }

    deinit { close() }

    /// Closes the connection (idempotent). The fd is invalid afterwards.
    package func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(fd)
        release()
    }
}

/// Carries the Swift handler through MHD's `void *` closure argument of the upgrade callback.
final class UpgradeBox {
    let handler: @Sendable (UpgradedSocket) -> Void
    let connections: ConnectionTable

    init(_ handler: @escaping @Sendable (UpgradedSocket) -> Void, connections: ConnectionTable) {
        self.handler = handler
        self.connections = connections
    }
}

let upgradeCallback: MHD_UpgradeHandler = { boxPointer, connection, _, extraIn, extraInSize, socket, handle in
    guard let boxPointer else { return }
    let box = Unmanaged<UpgradeBox>.fromOpaque(boxPointer).takeRetainedValue()
    guard let handle else { return }
    // The WebSocket keeps the connection's place in the caps; MHD forgets the connection now.
    var release: @Sendable () -> Void = {}
    if let connection { release = box.connections.upgraded(HTTPServer.connectionId(connection)) }
    var extra: [UInt8] = []
    if let extraIn, extraInSize > 0 {
        extraIn.withMemoryRebound(to: UInt8.self, capacity: extraInSize) {
            extra = Array(UnsafeBufferPointer(start: $0, count: extraInSize))
        }
    }
    let own = fcntl(socket, F_DUPFD_CLOEXEC, 0)
    // Hand MHD's side back right away; with a failed dup this ends the connection, as it must.
    _ = pr_mhd_upgrade_close(handle)
    guard own >= 0 else {
        release()
        return
    }
    let flags = fcntl(own, F_GETFL)
    _ = fcntl(own, F_SETFL, flags | O_NONBLOCK)
    box.handler(UpgradedSocket(fd: own, extraInput: extra, release: release))
}
