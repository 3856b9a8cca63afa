import Glibc
import RelayCore

/// The one wall-clock deadline of a delivery attempt.
struct Deadline {
    let at: Int64

    init(milliseconds: Int) { at = MonotonicClock.milliseconds() + Int64(milliseconds) }

    /// Milliseconds left, at least 0.
    var remaining: Int { Int(max(0, at - MonotonicClock.milliseconds())) }

    /// Sets the socket's receive or send timeout to the time left; throws once none is.
    func arm(_ fd: Int32, _ option: Int32) throws(WebhookClient.Failure) {
        let left = remaining
        guard left > 0 else { throw WebhookClient.Failure(description: "timed out") }
        var timeout = timeval(tv_sec: left / 1000, tv_usec: (left % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
}
