internal import CMicroHTTPD
import RelayLocks
import Synchronization

/// The per-request state MHD keeps for us between access-handler calls (in `*con_cls`).
///
/// `@unchecked Sendable`: `method`, `path`, `body`, `dispatched` and `bodyTooLarge` are touched
/// only by the MHD thread that owns the connection; the response hand-over is under `state`.
final class RequestContext: @unchecked Sendable {
    let method: String
    let path: String
    let id: String
    /// The connection table's id of the connection carrying this request.
    let connectionId: UInt64
    var body: [UInt8] = []
    var bodyTooLarge = false
    var dispatched = false

    private struct State {
        var response: HTTPResponse?
        var suspended = false
    }

    private let state = LockedValue(State())

    init(method: String, path: String, id: String, connectionId: UInt64) {
        self.method = method
        self.path = path
        self.id = id
        self.connectionId = connectionId
    }

    /// On the MHD thread after the handler returned: the response if it is already there,
    /// otherwise suspends the connection (under the lock, so `deliver` cannot miss it).
    func responseOrSuspend(_ suspend: () -> Void) -> HTTPResponse? {
        state.withLock { state in
            if let response = state.response {
                state.response = nil
                return response
            }
            state.suspended = true
            suspend()
            return nil
        }
    }

    /// From any thread: stores the response; true when the connection must be resumed.
    func deliver(_ response: HTTPResponse) -> Bool {
        state.withLock { state in
            state.response = response
            return state.suspended
        }
    }

    func takeResponse() -> HTTPResponse? {
        state.withLock { state in
            defer { state.response = nil }
            return state.response
        }
    }
}

/// Sends the answer to one request, from any thread, exactly once (later calls are ignored).
package final class HTTPResponder: Sendable {
    private let context: RequestContext
    /// `MHD_Connection *`, valid until the request completes; a suspended connection cannot
    /// complete, so it is still valid when `send` resumes it.
    private nonisolated(unsafe) let connection: OpaquePointer
    private let sent = Atomic<Bool>(false)

    init(context: RequestContext, connection: OpaquePointer) {
        self.context = context
        self.connection = connection
    }

    package var requestId: String { context.id }

    package func send(_ response: HTTPResponse) {
        guard !sent.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if context.deliver(response) {
            MHD_resume_connection(connection)
        }
    }
}
