import RelayCore
import RelayTransport
import Testing

/// The SSRF guard over spellings of internal addresses. Nothing here sends traffic: the only
/// resolution is of numeric spellings and `localhost`, which the resolver answers locally.
@Suite struct SSRFGuardTests {
    /// A careless operator allowed these *names*; they are odd spellings of loopback or
    /// unspecified addresses (decimal, hex, octal, short forms, localhost variants), so the
    /// resolver turns them into internal addresses and delivery must refuse them.
    @Test(arguments: [
        "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "017700000001", "127.1", "127.0.1", "localhost",
        "LOCALHOST", "localhost.", "0",
    ])
    func oddSpellingsAllowedAsNamesAreRefusedAtDelivery(_ host: String) throws {
        let guardian = SSRFGuard(allowList: try HostAllowList.parse([host.lowercased()]).get())
        guard case .failure = guardian.addresses(for: try PushURL("http://\(host):8080/push")) else {
            Issue.record("\(host) was allowed")
            return
        }
    }

    /// Internal addresses written canonically (IPv4, IPv4-mapped IPv6, link-local, unique-local,
    /// CGNAT, metadata, unspecified) are refused unless the operator listed that network.
    @Test(arguments: [
        "0.0.0.0", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "100.64.1.1", "127.0.0.1",
        "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]", "[fe80::1]", "[fd00::1]", "[::]",
        "[64:ff9b::7f00:1]", "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::1]", "[2002:c0a8:1::]", "[2001:0:4136:e378::1]",
        "[64:ff9b:1::1]",
    ])
    func internalAddressesAreRefusedUnlessListed(_ host: String) throws {
        let guardian = SSRFGuard(allowList: try HostAllowList.parse(["push.example.com", "*.example.net"]).get())
        let url = try PushURL("http://\(host):8080/push")
        #expect(!guardian.allowList.allows(host: url.host, port: url.port))  // refused at registration (400)
        guard case .failure = guardian.addresses(for: url) else {  // and again at delivery
            Issue.record("\(host) was allowed")
            return
        }
    }

    @Test func explicitlyAllowedNetworksPass() throws {
        let guardian = SSRFGuard(
            allowList: try HostAllowList.parse(["127.0.0.1:9", "[::1]:9", "10.1.0.0/16", "localhost:*"]).get())
        #expect((try? guardian.addresses(for: PushURL("http://127.0.0.1:9/p")).get()) != nil)
        #expect((try? guardian.addresses(for: PushURL("http://[::1]:9/p")).get()) != nil)
        #expect((try? guardian.addresses(for: PushURL("http://127.0.0.1:2375/containers/json")).get()) == nil)
        #expect((try? guardian.addresses(for: PushURL("http://10.1.2.3/p")).get()) != nil)
        #expect((try? guardian.addresses(for: PushURL("http://10.2.0.1/p")).get()) == nil)
        // A name resolving to loopback is refused although loopback itself is allowed by address:
        // names must be allowed by name, and then still resolve to allowed or public addresses.
        #expect((try? guardian.addresses(for: PushURL("http://localhost/p")).get()) == nil)
    }

    @Test(arguments: [
        "file:///etc/passwd", "gopher://127.0.0.1:70/", "ftp://push.example.com/", "javascript:alert(1)",
        "http://user:pass@push.example.com/", "http://push.example.com:0/", "http:/push.example.com/",
        "//push.example.com/",
        "http://push.example.com\\@evil.com/", "http://push.example.com%2f@evil/",
    ])
    func malformedOrForeignURLsAreRefusedAtRegistration(_ text: String) {
        let list = (try? HostAllowList.parse(["push.example.com"]).get())
        let accepted = (try? PushURL(text)).map { list?.allows(host: $0.host, port: $0.port) == true } ?? false
        #expect(!accepted, "\(text)")
    }

    /// NAT64 and 6to4 addresses are judged by the IPv4 address they carry: a public one passes.
    @Test func translatedPublicAddressesAreNotSpecial() throws {
        #expect(IPAddress("64:ff9b::808:808")?.isSpecialPurpose == false)
        #expect(IPAddress("2002:808:808::1")?.isSpecialPurpose == false)
        #expect(IPAddress("64:ff9b::a00:1")?.isSpecialPurpose == true)
    }
}
