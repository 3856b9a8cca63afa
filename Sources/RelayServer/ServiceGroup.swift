/// The relay's parts with an orderly life, in the shape of swift-service-lifecycle, written
/// small: started in order; on shutdown, first told that it began (in reverse order: stop taking
/// new work), then stopped in reverse order, each with its own drain. If a start fails, what had
/// started is stopped the same way before the error goes up.
struct ServiceGroup {
    struct Service {
        var name: String
        var start: () throws -> Void = {}
        /// Stop taking new work (the HTTP server stops accepting; readiness fails).
        var beginShutdown: () -> Void = {}
        /// Finish or hand back the work in progress, then release what it holds.
        var stop: () -> Void = {}
    }

    private let services: [Service]
    private var started: [Service] = []

    init(_ services: [Service]) { self.services = services }

    mutating func start() throws {
        for service in services {
            do {
                try service.start()
            } catch {
                stop()
                throw error
            }
            started.append(service)
        }
    }

    mutating func stop() {
        for service in started.reversed() { service.beginShutdown() }
        for service in started.reversed() { service.stop() }
        started = []
    }
}
