import RelayLocks

/// Read connections, lent out one thread at a time. WAL lets them read while the writer writes.
final class ReaderPool: Sendable {
    /// A connection checked out of the pool. `@unchecked Sendable`: the pool hands each one to a
    /// single borrower at a time, so no two threads ever use it together.
    final class Reader: @unchecked Sendable {
        let connection: SQLiteConnection
        init(_ connection: SQLiteConnection) { self.connection = connection }
    }

    private let path: String
    private let idle = LockedValue<[Reader]>([])
    /// Free reader slots: bounds the open readers (each has its own page cache); further
    /// readers wait for one.
    private let slots = LockedValue(ReaderPool.maxReaders)
    static let maxReaders = 8

    init(path: String) { self.path = path }

    /// Runs `body` on an idle connection (opening one when none is idle).
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        slots.withLock(when: { $0 > 0 }) { $0 -= 1 }
        defer {
            slots.withLock { $0 += 1 }
            slots.signal()
        }
        let reader: Reader
        if let pooled = idle.withLock({ $0.popLast() }) {
            reader = pooled
        } else {
            let connection = try SQLiteConnection(path: path, readOnly: true)
            try connection.execute("PRAGMA cache_size = -1024")  // 1 MiB per reader
            reader = Reader(connection)
        }
        defer { idle.withLock { $0.append(reader) } }
        return try body(reader.connection)
    }

    func closeAll() {
        idle.withLock { $0.removeAll() }
    }
}
