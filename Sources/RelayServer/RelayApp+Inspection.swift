package import RelayCore
import RelayLive
package import RelayStore
import RelayWebSocket

/// What the live side knows, read directly: for the in-process tests, which check it without
/// going through the API that reports it.
extension RelayApp {
    /// Devices of `userId` online here (a socket in the foreground) or on another node.
    package func onlineDevices(_ userId: String) -> Set<String> { gateway.hub.onlineDevices(userId) }

    /// Sockets of `userId` open here, foreground or not.
    package func sessionCount(_ userId: String) -> Int { gateway.hub.sessionCount(userId: userId) }

    /// When each device of `userId` was last online, including a time not yet stored.
    package func lastOnline(_ userId: String) throws(StoreError) -> [String: Timestamp] {
        try gateway.hub.lastOnline(userId)
    }

    /// How often the socket loop's thread has woken so far.
    package var socketLoopTurns: UInt64 { gateway.loop.turns }
}
