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
    /// The end of the last durable record: where the next append goes.
    package private(set) var end: Int
    private var poisoned = false

    /// Opens (creating) the log at `path`; `recovered` gets each whole record's payload in order.
    package init(path: String, recovered: ([UInt8]) -> Void = { _ in }) throws(Failure) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
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
        guard !poisoned else { throw .poisoned }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(payloads.reduce(0) { $0 + $1.count + LogFraming.headerSize })
        for payload in payloads {
            guard !payload.isEmpty else { throw .emptyRecord }
            guard payload.count <= LogFraming.maxPayload else { throw .recordTooLarge(payload.count) }
            LogFraming.append(payload, to: &buffer)
        }
        let start = end
        do throws(Failure) {
            try write(buffer, at: start)
            guard fdatasync(fd) == 0 else { throw Failure.io(operation: "fdatasync", errno: errno) }
        } catch {
            poisoned = true
            throw error
        }
        end = start + buffer.count
        return start
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
