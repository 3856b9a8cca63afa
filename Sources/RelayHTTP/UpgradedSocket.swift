internal import CMicroHTTPD
import Synchronization

/// A socket libmicrohttpd handed over after a `101 Switching Protocols` answer.
///
/// It owns the upgrade handle: `close()` ends the connection through
/// `MHD_upgrade_action(CLOSE)` — never `close(fd)`, which would leak MHD's side and leave the
/// socket in CLOSE-WAIT. `deinit` closes a socket its owner forgot.
package final class UpgradedSocket: Sendable {
    /// Non-blocking; belongs to this object until `close()`.
    package let fd: Int32
    /// Bytes MHD read past the request head (the client's first frames); process them first.
    package let extraInput: [UInt8]
    /// `MHD_UpgradeResponseHandle *`, released exactly once through `closed`.
    private nonisolated(unsafe) let handle: OpaquePointer
    private let closed = Atomic<Bool>(false)

    init(fd: Int32, handle: OpaquePointer, extraInput: [UInt8]) {
        self.fd = fd
        self.handle = handle
        self.extraInput = extraInput
    }

    deinit { close() }

    /// Ends the connection (idempotent). The fd is invalid afterwards.
    package func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = pr_mhd_upgrade_close(handle)
    }

    package var isClosed: Bool { closed.load(ordering: .acquiring) }
}

/// Carries the Swift handler through MHD's `void *` closure argument of the upgrade callback.
final class UpgradeBox {
    let handler: @Sendable (UpgradedSocket) -> Void
    init(_ handler: @escaping @Sendable (UpgradedSocket) -> Void) { self.handler = handler }
}

let upgradeCallback: MHD_UpgradeHandler = { boxPointer, _, _, extraIn, extraInSize, socket, handle in
    guard let boxPointer else { return }
    let box = Unmanaged<UpgradeBox>.fromOpaque(boxPointer).takeRetainedValue()
    guard let handle else { return }
    var extra: [UInt8] = []
    if let extraIn, extraInSize > 0 {
        extraIn.withMemoryRebound(to: UInt8.self, capacity: extraInSize) {
            extra = Array(UnsafeBufferPointer(start: $0, count: extraInSize))
        }
    }
    box.handler(UpgradedSocket(fd: socket, handle: handle, extraInput: extra))
}
