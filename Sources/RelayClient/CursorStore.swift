public import Foundation
import RelayLocks

/// Where the client keeps its resume cursor, so that a restarted app resumes where it was.
public protocol CursorStore: Sendable {
    func load() -> RelayCursor?
    func save(_ cursor: RelayCursor)
}

/// The last message the app has and the inbox it belongs to.
public struct RelayCursor: Sendable, Equatable, Codable {
    public var epoch: String?
    public var seq: Int64

    public init(epoch: String?, seq: Int64) {
        self.epoch = epoch
        self.seq = seq
    }
}

/// A small JSON file, replaced atomically: what an app should pass as `cursorStore` to keep its
/// place across launches (the default, `InMemoryCursorStore`, forgets it).
public struct FileCursorStore: CursorStore {
    public let url: URL

    public init(url: URL) { self.url = url }

    public func load() -> RelayCursor? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(RelayCursor.self, from: data)
    }

    public func save(_ cursor: RelayCursor) {
        guard let data = try? JSONEncoder().encode(cursor) else { return }
        try? data.write(to: url, options: .atomic)
    }
}

/// Keeps the cursor in memory only (tests, or apps that resync on every launch).
public final class InMemoryCursorStore: CursorStore, Sendable {
    private let cursor: LockedValue<RelayCursor?>

    public init(_ cursor: RelayCursor? = nil) { self.cursor = LockedValue(cursor) }

    public func load() -> RelayCursor? { cursor.withLock { $0 } }

    public func save(_ cursor: RelayCursor) { self.cursor.withLock { $0 = cursor } }
}
