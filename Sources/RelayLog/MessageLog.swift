import Glibc

/// An append-only file of records (`LogFraming`), each append made durable by one `fdatasync`:
/// the write path's log, where an accepted message is written once, sequentially.
///
/// Opening it reads every record and cuts a torn tail (a crash during an append); damage
/// elsewhere is refused, never cut. After a failed write or sync the log takes no more appends:
/// what reached the disk is unknown until it is opened and read again (the lesson of
/// PostgreSQL's "fsyncgate": a retried fsync can report success for pages the kernel dropped).
/// One thread uses it at a time (the store's writer).
package final class MessageLog {
    package enum Failure: Error, Equatable, Sendable {
        case open(path: String, errno: Int32)
        case damaged(path: String, offset: Int)
        case io(operation: String, errno: Int32)
        /// An earlier write or sync failed; reopen the log.
        case poisoned
        case emptyRecord
        case recordTooLarge(Int)
    }

    private let fd: Int32
    /// The end of the last record written: where the next one goes.
    package private(set) var end: Int
    private var poisoned = false

    /// Opens (creating) the log at `path`; `recovered` gets each whole record's payload in order.
    package init(path: String, recovered: ([UInt8]) -> Void = { _ in }) throws(Failure) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .open(path: path, errno: errno) }
        do throws(Failure) {
            let bytes = try Self.readAll(fd)
            let scan = LogFraming.scan(bytes)
            if case .damaged(let offset) = scan.tail { throw Failure.damaged(path: path, offset: offset) }
            for payload in scan.payloads { recovered(Array(bytes[payload])) }
            end = scan.end
            if scan.tail == .torn {
                guard ftruncate(fd, off_t(end)) == 0, fsync(fd) == 0 else {
                    throw Failure.io(operation: "truncate a torn tail", errno: errno)
                }
            }
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// Appends `payloads` as records and syncs them: durable when this returns. Returns where
    /// the first one starts.
    @discardableResult
    package func append(_ payloads: [[UInt8]]) throws(Failure) -> Int {
        let start = end
        for payload in payloads { try write(payload) }
        try sync()
        return start
    }

    /// Writes one record after the last, not yet synced (`sync` makes it durable, `cut` takes it
    /// back). Returns where it starts.
    @discardableResult
    package func write(_ payload: [UInt8]) throws(Failure) -> Int {
        guard !poisoned else { throw .poisoned }
        guard !payload.isEmpty else { throw .emptyRecord }
        guard payload.count <= LogFraming.maxPayload else { throw .recordTooLarge(payload.count) }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(payload.count + LogFraming.headerSize)
        LogFraming.append(payload, to: &buffer)
        let start = end
        try poisoning { () throws(Failure) in try write(buffer, at: start) }
        end = start + buffer.count
        return start
    }

    /// Makes every record written so far durable.
    package func sync() throws(Failure) {
        guard !poisoned else { throw .poisoned }
        try poisoning { () throws(Failure) in
            guard fdatasync(fd) == 0 else { throw Failure.io(operation: "fdatasync", errno: errno) }
        }
    }

    /// Takes back the records from `offset` on (written, not yet answered for).
    package func cut(to offset: Int) throws(Failure) {
        guard !poisoned else { throw .poisoned }
        try poisoning { () throws(Failure) in
            guard ftruncate(fd, off_t(offset)) == 0 else { throw Failure.io(operation: "ftruncate", errno: errno) }
        }
        end = offset
    }

    /// Empties the log, durably, once what it held is kept elsewhere; a poisoned log is usable
    /// again after it (nothing of what a failed write left is read any more).
    package func reset() throws(Failure) {
        guard ftruncate(fd, 0) == 0, fsync(fd) == 0 else {
            poisoned = true
            throw .io(operation: "truncate", errno: errno)
        }
        end = 0
        poisoned = false
    }

    private func poisoning(_ body: () throws(Failure) -> Void) throws(Failure) {
        do throws(Failure) {
            try body()
        } catch {
            poisoned = true
            throw error
        }
    }

    /// The payloads of the records from `offset` (a record's start) to the end.
    package func read(from offset: Int) throws(Failure) -> [[UInt8]] {
        var bytes = [UInt8](repeating: 0, count: max(0, end - offset))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress.map { $0 + done }, $0.count - done, off_t(offset + done))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw .io(operation: "pread", errno: count < 0 ? errno : EIO) }
            done += count
        }
        let scan = LogFraming.scan(bytes)
        guard scan.tail == .clean else { throw .damaged(path: "", offset: offset + scan.end) }
        return scan.payloads.map { Array(bytes[$0]) }
    }

    private func write(_ buffer: [UInt8], at offset: Int) throws(Failure) {
        var written = 0
        while written < buffer.count {
            let count = buffer.withUnsafeBytes { raw in
                pwrite(fd, raw.baseAddress.map { $0 + written }, raw.count - written, off_t(offset + written))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw .io(operation: "pwrite", errno: count < 0 ? errno : ENOSPC) }
            written += count
        }
    }

    /// The payloads of the whole records of the log at `path` as it stands (a torn tail left out),
    /// read without opening it for writing: a copy of the log another process writes (`pushrelay
    /// backup`). None when there is no log.
    package static func records(at path: String) throws(Failure) -> [[UInt8]] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return [] }
            throw .open(path: path, errno: errno)
        }
        defer { close(fd) }
        let bytes = try readAll(fd)
        let scan = LogFraming.scan(bytes)
        if case .damaged(let offset) = scan.tail { throw .damaged(path: path, offset: offset) }
        return scan.payloads.map { Array(bytes[$0]) }
    }

    private static func readAll(_ fd: Int32) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw .io(operation: "pread", errno: errno) }
            guard count > 0 else { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }
}
