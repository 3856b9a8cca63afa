package import Foundation

/// One run of the `pushrelay` binary to its end (a subcommand, or a `serve` expected to fail).
package struct RelayCommand: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String

    /// Runs `pushrelay arguments…` in `directory` with only `environment` of the `PUSHRELAY_`
    /// variables, and waits for it to exit (killed after `timeout` seconds).
    package static func run(
        _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil, timeout: Double = 30
    ) throws -> RelayCommand {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: RelayProcess.binaryPath)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHRELAY_") }
        env["SWIFT_BACKTRACE"] = "enable=no"
        env.merge(environment) { $1 }
        process.environment = env
        if let directory { process.currentDirectoryURL = directory }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return RelayCommand(
            status: process.terminationStatus,
            stdout: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }
}
