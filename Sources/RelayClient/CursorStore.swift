public import Foundation
import RelayLocks

/// Where the client keeps its resume cursor, so that a restarted app resumes where it was.
public protocol CursorStore: Sendable {
    /// The saved cursor, or nil on first launch.
    func load() -> RelayCursor?
    /// Keeps `cursor`; called after every sync and every 100 messages.
    func save(_ cursor: RelayCursor)
}

/// The last message the app has and the inbox it belongs to.
public struct RelayCursor: Sendable, Equatable, Codable {
    /// The inbox the cursor belongs to (a new epoch means: resync from the chat server).
    public var epoch: String?
    /// The last seq delivered to the app.
    public var seq: Int64

    /// A cursor at `seq` of the inbox `epoch`.
    public init(epoch: String?, seq: Int64) {
        self.epoch = epoch
        self.seq = seq
    }
}

/// A small JSON file, replaced atomically: what an app should pass as `cursorStore` to keep its
/// place across launches (the default, `InMemoryCursorStore`, forgets it).
public struct FileCursorStore: CursorStore {
    /// The JSON file.
    public let url: URL

    /// A store in the file at `url` (created on the first save).
    public init(url: URL) { self.url = url }

    /// Reads the file; nil when it is missing or unreadable.
    public func load() -> RelayCursor? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(RelayCursor.self, from: data)
    }

    /// Writes the file atomically (a crash leaves the old cursor or the new one, never half).
    public func save(_ cursor: RelayCursor) {
        guard let data = try? JSONEncoder().encode(cursor) else { return }
        try? data.write(to: url, options: .atomic)
    }
}

/// Keeps the cursor in memory only (tests, or apps that resync on every launch).
public final class InMemoryCursorStore: CursorStore, Sendable {
    private let cursor: LockedValue<RelayCursor?>

    /// A store starting with `cursor`.
    public init(_ cursor: RelayCursor? = nil) { self.cursor = LockedValue(cursor) }

    /// The cursor saved last.
    public func load() -> RelayCursor? { cursor.withLock { $0 } }

    /// Keeps `cursor` in memory.
    public func save(_ cursor: RelayCursor) { self.cursor.withLock { $0 = cursor } }
}
