/// A subcommand's own options, parsed strictly: `--name value` (or `--name=value`) for the
/// names in `values`, bare `--name` for `switches`, and exactly `positional` other arguments;
/// anything else is a usage error naming it.
struct Options {
    var values: [String: String] = [:]
    var switches: Set<String> = []
    var positional: [String] = []

    @discardableResult
    static func parse(
        _ arguments: [String], values names: Set<String>, switches: Set<String>, positional count: Int = 0
    ) throws(Command.UsageError) -> Options {
        var options = Options()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("-") else {
                options.positional.append(argument)
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            if switches.contains(name), parts.count == 1 {
                options.switches.insert(name)
            } else if names.contains(name) {
                if parts.count == 2 {
                    options.values[name] = parts[1]
                } else {
                    guard index < arguments.count else { throw .init(description: "\(name) needs a value") }
                    options.values[name] = arguments[index]
                    index += 1
                }
            } else {
                throw .init(description: "unknown option '\(argument)'")
            }
        }
        guard options.positional.count == count else {
            throw .init(
                description: count == 0
                    ? "unexpected argument '\(options.positional[0])'"
                    : "expected \(count) argument\(count == 1 ? "" : "s"), got \(options.positional.count)")
        }
        return options
    }
}
