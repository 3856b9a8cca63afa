import RelayCore
import RelayHTTP
import RelayLive
import RelayTelemetry

extension RelayAPI {
    /// `POST /v1/signals {recipients, conversationId, name, data?, senderId?, senderDeviceId?}`:
    /// an ephemeral signal (typing…) for the online devices of `recipients`, live only — never
    /// stored, never pushed, not counted in `unread`; offline devices simply miss it. The sender's
    /// own device (`senderId` + `senderDeviceId`) is skipped. Answers how many sockets got it.
    func postSignal(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let json = try request.jsonBody()
        let (signal, recipients, senderId, senderDeviceId) = try APIError.validating {
            () throws(ValidationError) -> (Signal, [String], String?, String?) in
            let fields = try FieldReader(json)
            let signal = try Signal(fields)
            let recipients = try fields.identifierList("recipients", maxCount: 1000)
            let senderId = try fields.optionalString("senderId", maxLength: 200)
            let senderDeviceId = fields.value("senderDeviceId") != nil ? try fields.identifier("senderDeviceId") : nil
            return (signal, recipients, senderId, senderDeviceId)
        }
        let sender = senderId.flatMap { userId in senderDeviceId.map { (userId: userId, deviceId: $0) } }
        let sent = live.signal(signal, senderId: senderId, to: recipients, except: sender)
        metrics.recordSignal(.sent, count: sent)
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("devices", Int64(sent))
        writer.endObject()
        reply.json(200, writer.bytes)
    }
}
