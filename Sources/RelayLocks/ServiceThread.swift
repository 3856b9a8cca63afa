// The server's threads run on Linux only; the SDK, which shares this target for `LockedValue`,
// also builds on Apple platforms, where `pthread_t` is a pointer and this would not compile.
#if os(Linux)
import Glibc

/// A long-lived thread of the relay (the writer, the event loops, the timers, the resolvers):
/// the one way it starts one. POSIX threads, named for `top -H` and `perf`, with an optional
/// stack size; `join` for an owner that waits for it to end.
package struct ServiceThread: @unchecked Sendable {
    private let thread: pthread_t
    private let joinable: Bool

    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new thread named `name` (Linux shows its first 15 bytes); nil if the
    /// system refused one. Unless `joinable`, nobody waits for it (its resources go when it ends).
    @discardableResult
    package static func start(
        _ name: String, stackSize: Int? = nil, joinable: Bool = false, _ body: @escaping @Sendable () -> Void
    ) -> ServiceThread? {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, 64 * 1024)) }
        if !joinable { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        let start = Unmanaged.passRetained(Start(name: name, body: body))
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { pointer in
                guard let pointer else { return nil }
                let start = Unmanaged<Start>.fromOpaque(pointer).takeRetainedValue()
                nameThisThread(start.name)
                start.body()
                return nil
            }, start.toOpaque())
        guard created == 0 else {
            start.release()
            return nil
        }
        return ServiceThread(thread: thread, joinable: joinable)
    }

    /// Waits for a `joinable` thread to end (a detached one cannot be waited for).
    package func join() {
        guard joinable else { return }
        pthread_join(thread, nil)
    }
}

/// Names the calling thread (its first 15 bytes), as `pthread_setname_np` does, which Swift does
/// not import here (it needs `_GNU_SOURCE`): through the thread's `comm` file.
private func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
#endif
