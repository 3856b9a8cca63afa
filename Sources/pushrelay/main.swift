import Foundation
import RelayServer

// Top-level code is main-actor isolated: keep it to this one call (callbacks live in RelayServer).
exit(
    Command.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
