package import RelayCore
package import RelayCrypto

/// The service-account JSON Google issues for FCM HTTP v1: who the relay is (`client_email`),
/// which project it pushes for, the RSA key its OAuth assertions are signed with, and where
/// to exchange them for an access token (`token_uri`).
package struct FCMServiceAccount: Sendable {
    package let projectId: String
    package let clientEmail: String
    package let privateKeyId: String?
    package let key: RSAKey
    package let tokenURI: PushURL

    package struct Invalid: Error, CustomStringConvertible {
        package var description: String
    }

    /// Parses the file's bytes; the message never quotes the key.
    package init(json bytes: [UInt8]) throws(Invalid) {
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            // What is wrong and where (a duplicate key, a stray comma), never the text around it.
            throw Invalid(description: "the FCM service account file is not valid JSON: \(error)")
        }
        guard case .object = json else {
            throw Invalid(description: "the FCM service account file is not a JSON object")
        }
        func string(_ name: String) throws(Invalid) -> String {
            guard let value = json[name]?.stringValue, !value.isEmpty else {
                throw Invalid(description: "the FCM service account file has no '\(name)'")
            }
            return value
        }
        projectId = try string("project_id")
        clientEmail = try string("client_email")
        privateKeyId = json["private_key_id"]?.stringValue
        let pem = try string("private_key")
        do {
            key = try RSAKey(pem: pem)
        } catch {
            throw Invalid(
                description: "the FCM service account's private_key is not an RSA key (\(error.code.rawValue))")
        }
        let uri = (try? string("token_uri")) ?? "https://oauth2.googleapis.com/token"
        guard let tokenURI = try? PushURL(uri), tokenURI.scheme == "https" else {
            throw Invalid(description: "the FCM service account's token_uri must be an https URL")
        }
        self.tokenURI = tokenURI
        // A project id goes into the request path.
        guard
            projectId.utf8.allSatisfy({
                $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".")
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            })
        else { throw Invalid(description: "the FCM service account's project_id has unexpected characters") }
    }
}
