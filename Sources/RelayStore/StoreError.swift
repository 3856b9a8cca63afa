/// Why the store could not do what was asked. The HTTP layer answers 503 for `unavailable`
/// (disk full, I/O error, database unreachable, closed): nothing was stored, the client should
/// retry.
package enum StoreError: Error, Sendable, CustomStringConvertible {
    case unavailable(DatabaseError)
    case closed

    package var description: String {
        switch self {
        case .unavailable(let error): return "store unavailable: \(error)"
        case .closed: return "store closed"
        }
    }
}
