package import RelayCore
package import RelayHTTP
package import RelayStore

/// What the REST API asks of the live side (`LiveGateway` answers): committed messages and
/// upgraded sockets in; acks, deleted devices, background state and signals told; presence read.
package protocol LiveSide: Sendable {
    /// A message was committed: live frames for its recipients' open sockets.
    func publish(_ message: IncomingMessage, recipients: [RecipientSeq], createdAt: Timestamp)
    /// Takes an upgraded socket and starts its session.
    func open(
        _ socket: UpgradedSocket, claims: ClientClaims, deviceId: String, after: Int64, epoch: String?,
        background: Bool)
    /// The user's ack cursor moved (REST ack): sockets and presence hear of it.
    func acknowledged(userId: String, seq: Int64)
    /// Closes the device's sockets (it was deleted).
    func close(userId: String, deviceId: String, reason: String)
    /// A device said it went to the background or came back (REST presence).
    func setBackground(userId: String, deviceId: String, _ background: Bool)
    /// Hands a signal to the online sockets of `userIds`, except its sender's; how many took it.
    func signal(
        _ signal: Signal, senderId: String?, to userIds: [String], except sender: (userId: String, deviceId: String)?
    ) -> Int

    /// The user's devices online (a foreground socket here or on another node).
    func onlineDevices(_ userId: String) -> Set<String>
    /// The user's devices with a socket open here, foreground or not.
    func devices(of userId: String) -> Set<String>
    /// When each device of the user was last online, including a time not yet stored.
    func lastOnline(_ userId: String) throws(StoreError) -> [String: Timestamp]
    /// Sockets of the user open here.
    func sessionCount(userId: String) -> Int
    /// How many users are online, and the first `limit` of them.
    func onlineUsers(limit: Int) -> (total: Int, first: [String])
    /// Sockets open here, sessions or not yet.
    var socketCount: Int { get }
}
