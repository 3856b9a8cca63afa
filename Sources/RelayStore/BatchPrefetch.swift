/// What a write transaction's optimistic pass read up front, in the round trip that locks its
/// inboxes (`SQLStore.lockInboxes`), so that its writes need not wait for a read each: the head
/// seq of every locked inbox and the active devices of its user. The writes keep it current
/// (an accept advances a head; a device write drops that user's devices, to be read again).
package struct BatchPrefetch {
    var heads: [String: Int64] = [:]
    var devices: [String: [String]] = [:]
}
