import Foundation
import RelayClient

// pushrelay-tail: prints a user's messages as they arrive, through the client SDK.
//   pushrelay-tail --url http://127.0.0.1:8080 --user alice --device phone --key SERVER_KEY
// (with a server key it mints its own client tokens; --token TOKEN uses a given one).
await Tail.run(Array(CommandLine.arguments.dropFirst()))
