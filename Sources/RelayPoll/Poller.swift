import CLinux
import Glibc

/// An epoll instance and the eventfd that wakes it from other threads; owns both descriptors.
/// The event loops (WebSocket sockets, webhook deliveries) are built on it.
///
/// `@unchecked Sendable`: `wake()` may be called from any thread (a write to the eventfd);
/// everything else belongs to the one thread that runs the loop.
package final class Poller: @unchecked Sendable {
    package struct Interest: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }

        package static let readable = Interest(rawValue: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        package static let writable = Interest(rawValue: EPOLLOUT.rawValue)
        /// Reported once per change of readiness (the owner reads or writes until EAGAIN).
        package static let edgeTriggered = Interest(rawValue: EPOLLET.rawValue)
    }

    package struct Event {
        package var token: UInt64
        /// Input, end of input, or an error (a read tells which).
        package var readable: Bool
        package var writable: Bool
    }

    package struct Failure: Error, CustomStringConvertible {
        package let call: String
        package let code: Int32
        package var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    /// The token `wake()` is reported under; never use it for a descriptor.
    package static let wakeToken: UInt64 = 0

    private let epollFD: Int32
    private let wakeFD: Int32
    private var events = [epoll_event](repeating: epoll_event(), count: 256)
    /// The thread that waits on it (set at the first `wait`): the loop's state is confined to it.
    private var owner: pthread_t?

    package init() throws(Failure) {
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw Failure(call: "epoll_create1", code: errno) }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            let code = errno
            Glibc.close(epollFD)
            throw Failure(call: "eventfd", code: code)
        }
        guard add(wakeFD, token: Self.wakeToken, interest: .readable) else {
            let code = errno
            Glibc.close(wakeFD)
            Glibc.close(epollFD)
            throw Failure(call: "epoll_ctl", code: code)
        }
    }

    deinit {
        Glibc.close(wakeFD)
        Glibc.close(epollFD)
    }

    /// Watches `fd`; false (with `errno`) when epoll refuses it.
    package func add(_ fd: Int32, token: UInt64, interest: Interest) -> Bool {
        control(EPOLL_CTL_ADD, fd, token: token, interest: interest)
    }

    package func modify(_ fd: Int32, token: UInt64, interest: Interest) -> Bool {
        control(EPOLL_CTL_MOD, fd, token: token, interest: interest)
    }

    /// Stops watching `fd` (before it is closed, so that a reused number is not confused with it).
    package func remove(_ fd: Int32) {
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
    }

    private func control(_ operation: Int32, _ fd: Int32, token: UInt64, interest: Interest) -> Bool {
        var event = epoll_event()
        event.events = interest.rawValue
        event.data.u64 = token
        return epoll_ctl(epollFD, operation, fd, &event) == 0
    }

    /// Wakes a `wait` in progress, or the next one, from any thread.
    package func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// A debug check (nothing in release builds) that the caller is the thread that waits on
    /// this poller: the loops call it where they touch state only their thread may.
    package func assertOnLoopThread(file: StaticString = #file, line: UInt = #line) {
        assert(
            owner.map { pthread_equal($0, pthread_self()) != 0 } ?? true, "loop state touched off its thread",
            file: file, line: line)
    }

    /// Waits up to `timeoutMs` (-1: no limit) and hands each event to `body`; a wake-up is
    /// consumed here and not reported. False when epoll failed for good.
    package func wait(timeoutMs: Int32, _ body: (Event) -> Void) -> Bool {
        if owner == nil { owner = pthread_self() }
        assertOnLoopThread()
        let count = epoll_wait(epollFD, &events, Int32(events.count), timeoutMs)
        if count < 0 { return errno == EINTR }
        let hangup = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
        for index in 0..<Int(count) {
            let event = events[index]
            let token = event.data.u64
            if token == Self.wakeToken {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
                continue
            }
            body(
                Event(
                    token: token, readable: event.events & hangup != 0,
                    writable: event.events & EPOLLOUT.rawValue != 0))
        }
        return true
    }
}
