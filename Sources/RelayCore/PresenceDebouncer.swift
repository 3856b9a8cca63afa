/// Debounces a user's online/offline transitions before they are reported (docs/ARCHITECTURE.md §2): a
/// flapping mobile connection that drops and comes back within `delay` produces no event at
/// all, and a real change is reported once, `delay` after it happened.
///
/// Pure: the caller feeds observations and asks for what is due; no clock, no timers inside.
package struct PresenceDebouncer: Sendable {
    package struct Change: Sendable, Equatable {
        package var userId: String
        package var online: Bool
        /// When the change really happened (not when it was reported).
        package var at: Timestamp

        package init(userId: String, online: Bool, at: Timestamp) {
            self.userId = userId
            self.online = online
            self.at = at
        }
    }

    private struct Pending: Sendable {
        var online: Bool
        var since: Timestamp
        var due: Timestamp
    }

    package let delayMilliseconds: Int64
    /// What was last reported per user (absent: offline, never reported).
    private var reported: [String: Bool] = [:]
    private var pending: [String: Pending] = [:]

    package init(delayMilliseconds: Int64) {
        self.delayMilliseconds = delayMilliseconds
    }

    /// The user's state is now `online`.
    package mutating func observe(userId: String, online: Bool, at now: Timestamp) {
        let current = reported[userId] ?? false
        if online == current {
            pending[userId] = nil  // flapped back before it was reported
        } else if pending[userId]?.online != online {
            pending[userId] = Pending(
                online: online, since: now, due: Timestamp(milliseconds: now.milliseconds + delayMilliseconds))
        }
    }

    /// Whether a change waits to be reported.
    package var hasPending: Bool { !pending.isEmpty }

    /// Changes whose delay has passed, in the order they became due; they count as reported.
    package mutating func due(at now: Timestamp) -> [Change] {
        let ready = pending.filter { $0.value.due <= now }.sorted { $0.value.due < $1.value.due }
        var changes: [Change] = []
        for (userId, change) in ready {
            pending[userId] = nil
            if change.online {
                reported[userId] = true
            } else {
                reported[userId] = nil  // offline is the default: forget the user
            }
            changes.append(Change(userId: userId, online: change.online, at: change.since))
        }
        return changes
    }

    /// When the next change becomes due, if any (for the caller's timer).
    package var nextDue: Timestamp? { pending.values.map(\.due).min() }
}
