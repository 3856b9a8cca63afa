import Foundation
import RelayLog
import RelayPrimitives
import Testing

@Suite struct MessageLogTests {
    static func temporaryPath() -> String {
        NSTemporaryDirectory() + "pushrelay-log-\(UUID().uuidString)"
    }

    static func open(_ path: String) throws -> (log: MessageLog, recovered: [[UInt8]]) {
        var recovered: [[UInt8]] = []
        let log = try MessageLog(path: path) { recovered.append($0) }
        return (log, recovered)
    }

    static let batches: [[[UInt8]]] = [
        [Array("first".utf8)], [Array("second".utf8), Array(repeating: 7, count: 300)],
        [Array("{\"id\":\"m-3\"}".utf8)],
    ]

    @Test func checksumIsCRC32C() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }

    @Test func appendsAreReadBackInOrderAfterReopening() throws {
        let path = Self.temporaryPath()
        defer { unlink(path) }
        do {
            let (log, recovered) = try Self.open(path)
            #expect(recovered.isEmpty)
            for batch in Self.batches { try log.append(batch) }
        }
        let (log, recovered) = try Self.open(path)
        #expect(recovered == Self.batches.flatMap { $0 })
        #expect(log.end == (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int))
        #expect(throws: MessageLog.Failure.emptyRecord) { try log.append([[]]) }
    }

    /// A crash at any byte of an append: opening keeps every whole record before the cut, cuts
    /// the rest off the file, and the log goes on from there.
    @Test func aCrashAtEveryByteKeepsTheWholeRecordsBeforeIt() throws {
        let path = Self.temporaryPath()
        defer { unlink(path) }
        var ends: [Int] = []
        do {
            let (log, _) = try Self.open(path)
            for batch in Self.batches {
                for payload in batch {
                    try log.append([payload])
                    ends.append(log.end)
                }
            }
        }
        let whole = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let payloads = Self.batches.flatMap { $0 }
        for cut in 0...whole.count {
            let torn = Self.temporaryPath()
            defer { unlink(torn) }
            // (Zeros after the cut: the file grew before the disk wrote the append's blocks.)
            let tail = cut % 2 == 0 ? [] : [UInt8](repeating: 0, count: 40)
            try Data(whole[0..<cut] + tail).write(to: URL(fileURLWithPath: torn))
            let kept = ends.filter { $0 <= cut }.count
            do {
                let (log, recovered) = try Self.open(torn)
                #expect(recovered == Array(payloads[0..<kept]), "cut at \(cut)")
                #expect(log.end == (kept == 0 ? 0 : ends[kept - 1]), "cut at \(cut)")
                try log.append([Array("after".utf8)])
            }
            let (_, again) = try Self.open(torn)
            #expect(again == Array(payloads[0..<kept]) + [Array("after".utf8)], "cut at \(cut)")
        }
    }

    /// A record that fails its checksum with records after it is damage, not a crash: refused,
    /// and the file is left as it is.
    @Test func damageBeforeTheEndIsRefusedNotCut() throws {
        let path = Self.temporaryPath()
        defer { unlink(path) }
        do {
            let (log, _) = try Self.open(path)
            for batch in Self.batches { try log.append(batch) }
        }
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[LogFraming.headerSize + 1] ^= 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(throws: MessageLog.Failure.damaged(path: path, offset: 0)) { _ = try Self.open(path) }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
    }
}
