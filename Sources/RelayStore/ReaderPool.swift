import RelayLocks

/// Read connections, lent out one thread at a time (SQLite's WAL, or PostgreSQL's MVCC, lets
/// them read while the writer writes).
final class ReaderPool: Sendable {
    /// A connection checked out of the pool. `@unchecked Sendable`: the pool hands each one to a
    /// single borrower at a time, so no two threads ever use it together.
    final class Reader: @unchecked Sendable {
        let connection: any SQLConnection
        init(_ connection: any SQLConnection) { self.connection = connection }
    }

    private let open: @Sendable () throws(DatabaseError) -> any SQLConnection
    private let idle = LockedValue<[Reader]>([])
    /// Free reader slots: bounds the open readers (each has its own cache or server backend);
    /// further readers wait for one.
    private let slots = LockedValue(ReaderPool.maxReaders)
    static let maxReaders = 8

    init(open: @escaping @Sendable () throws(DatabaseError) -> any SQLConnection) { self.open = open }

    /// Runs `body` on an idle connection (opening one when none is idle). A connection found
    /// broken afterwards is closed, not lent again.
    func read<T>(_ body: (any SQLConnection) throws(DatabaseError) -> T) throws(DatabaseError) -> T {
        slots.withLock(when: { $0 > 0 }) { $0 -= 1 }
        defer {
            slots.withLock { $0 += 1 }
            slots.signal()
        }
        // (Not `??`: its autoclosure would rethrow the error untyped.)
        var reader = if let idleReader = idle.withLock({ $0.popLast() }) { idleReader } else { Reader(try open()) }
        defer { if !reader.connection.isBroken { idle.withLock { $0.append(reader) } } }
        do {
            return try body(reader.connection)
        } catch  where reader.connection.isBroken {
            // Lost while it sat idle (the server restarted): a read is safe to run again, once,
            // on a fresh connection.
            reader = Reader(try open())
            return try body(reader.connection)
        }
    }

    func closeAll() {
        idle.withLock { $0.removeAll() }
    }
}
