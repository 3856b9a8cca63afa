package import RelayCore
package import RelayPoll

/// Sends one HTTP/1.1 POST and hands back the answer: the webhook, Web Push and FCM all go
/// through it. For a URL a client chose (a webhook, a browser's push endpoint) the SSRF guard
/// checks the host first, resolving a name on a resolver thread; the client then connects to
/// exactly the checked addresses. An operator's service URL (FCM) is resolved without the guard.
package final class HTTPSender: Sendable {
    /// Whether the SSRF guard applies to the URL, and with which allow-list.
    package enum Origin: Sendable {
        /// A webhook's `pushUrl` or `eventsUrl`: `pushAllowedHosts`.
        case chosenByClient
        /// A browser's Web Push endpoint: `webPushAllowedHosts`.
        case webPushEndpoint
        case operatorSetting
    }

    private let client: WebhookClient
    private let resolver: WorkerPool
    private let ssrfGuard: SSRFGuard
    private let webPushGuard: SSRFGuard

    /// - Parameter resolverThreads: threads resolving host names (`getaddrinfo` blocks); IP
    ///   literals skip them.
    package init(
        tls: TLSContext, allowList: HostAllowList, webPushAllowList: HostAllowList, connectTimeoutMs: Int,
        totalTimeoutMs: Int, resolverThreads: Int
    ) throws(Poller.Failure) {
        client = try WebhookClient(tls: tls, connectTimeoutMs: connectTimeoutMs, totalTimeoutMs: totalTimeoutMs)
        resolver = WorkerPool(threads: resolverThreads, name: "resolver")
        ssrfGuard = SSRFGuard(allowList: allowList)
        webPushGuard = SSRFGuard(allowList: webPushAllowList, setting: "webPushAllowedHosts")
    }

    /// Ends the resolver threads and the client's loop (requests in flight get no answer).
    package func stop() {
        resolver.stop()
        client.stop()
    }

    /// POSTs `body`; `done` runs on the client's thread (it must not block), once.
    package func post(
        _ url: PushURL, origin: Origin, headers: [(String, String)], body: [UInt8],
        done: @escaping @Sendable (Result<WebhookClient.Response, Failure>) -> Void
    ) {
        let send: @Sendable () -> Void = { [client, ssrfGuard, webPushGuard] in
            let addresses: [IPAddress]
            switch origin {
            case .chosenByClient, .webPushEndpoint:
                switch (origin == .webPushEndpoint ? webPushGuard : ssrfGuard).addresses(for: url) {
                case .failure(let refusal) where refusal.isFinal: return done(.failure(.refused(refusal.description)))
                case .failure(let refusal): return done(.failure(.unreachable(refusal.description)))
                case .success(let checked): addresses = checked
                }
            case .operatorSetting:
                addresses = IPAddress(url.host).map { [$0] } ?? SSRFGuard.resolve(url.host)
                guard !addresses.isEmpty else { return done(.failure(.unreachable("host does not resolve"))) }
            }
            client.post(url, addresses: addresses, headers: headers, body: body) { result in
                done(result.mapError { .unreachable($0.description) })
            }
        }
        if IPAddress(url.host) != nil { send() } else { resolver.submit(send) }
    }

    /// Why no answer came back.
    package enum Failure: Error, Sendable {
        /// The relay itself refused the URL (SSRF guard): never sent.
        case refused(String)
        /// Connecting, TLS, sending or reading failed, or the deadline passed.
        case unreachable(String)

        /// What the delivery policy makes of it.
        package var outcome: DeliveryOutcome {
            switch self {
            case .refused(let reason): return .refused(reason: "SSRF guard: \(reason)")
            case .unreachable(let reason): return .retry(reason: reason, notBeforeMilliseconds: nil)
            }
        }
    }
}
