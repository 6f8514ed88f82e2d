import GroserServer
import GroserSystem
import Testing

private func config(_ arguments: [String]) throws -> ServerConfig {
    switch try DaemonArguments.parse(arguments) {
    case .run(let config): return config
    case .help, .repair, .version:
        Issue.record("\(arguments) asked for help, a repair or the version")
        throw ServerError("not a run")
    }
}

@Suite("DaemonArguments")
struct DaemonArgumentsTests {
    @Test func noArgumentsRunWithTheDefaults() throws {
        let c = try config([])
        #expect(c.socketPath == ServerConfig.defaultSocketPath())
        #expect(c.dataDirectory == ServerConfig.defaultDataDirectory())
        #expect(c.imageBaseURL == "http://localhost:8080")
        #expect(c.maximumFrameBytes == 4_194_304)
        #expect(c.threads == max(1, ProcessInfo.processorCount))
        #expect(c.threads >= 1)
        #expect(c.logLevel == .info)
        #expect(c.socketPath.hasSuffix("/groserd.sock") || ProcessInfo.environment("GROSER_SOCKET") != nil)
        #expect(c.dataDirectory.hasSuffix("/groser"))
        #expect(c.frameReadTimeoutSeconds == 5)
        #expect(c.maximumUnfinishedFrameBytes == 67_108_864)
        #expect(c.idleTimeoutSeconds == 300)
        #expect(c.maximumConnectionsPerUID == 1024)
    }

    @Test func thePerUidMaximumIsAQuarterOfTheTotalUnlessGiven() throws {
        #expect(try config(["--max-connections", "64"]).maximumConnectionsPerUID == 16)
        #expect(try config(["--max-connections", "64", "--max-connections-per-uid", "40"]).maximumConnectionsPerUID == 40)
        #expect(throws: ServerError.self) { try config(["--max-connections-per-uid", "0"]) }
    }

    @Test func everyOptionSetsItsField() throws {
        let c = try config([
            "--socket", "/tmp/g/test.sock",
            "--data", "/var/lib/groser test",
            "--image-base-url", "https://img.example.com:8443",
            "--max-frame-bytes", "65536",
            "--threads", "3",
            "--log-level", "debug",
        ])
        #expect(c.socketPath == "/tmp/g/test.sock")
        #expect(c.dataDirectory == "/var/lib/groser test")
        #expect(c.imageBaseURL == "https://img.example.com:8443")
        #expect(c.maximumFrameBytes == 65_536)
        #expect(c.threads == 3)
        #expect(c.logLevel == .debug)
    }

    @Test(arguments: [
        (["--socket", "/run/a.sock"], "socket", "/run/a.sock"),
        (["--socket=/run/a=b.sock"], "socket", "/run/a=b.sock"),
        (["--data", "/srv/data"], "data", "/srv/data"),
        (["--data=/srv/data"], "data", "/srv/data"),
        (["--image-base-url", "http://cdn:9000"], "image", "http://cdn:9000"),
        (["--image-base-url=http://cdn:9000/?a=b"], "image", "http://cdn:9000/?a=b"),
        (["--max-frame-bytes", "1"], "frame", "1"),
        (["--max-frame-bytes=1073741824"], "frame", "1073741824"),
        (["--threads", "256"], "threads", "256"),
        (["--threads=1"], "threads", "1"),
        (["--log-level", "warning"], "log", "warning"),
        (["--log-level=warn"], "log", "warning"),
        (["--log-level", "ERROR"], "log", "error"),
        (["--log-level=Info"], "log", "info"),
        (["--frame-read-timeout", "0.5"], "frame-timeout", "0.5"),
        (["--frame-read-timeout=30"], "frame-timeout", "30.0"),
        (["--max-unfinished-frame-bytes", "1048576"], "unfinished", "1048576"),
        (["--max-unfinished-frame-bytes=1"], "unfinished", "1"),
        // The last occurrence wins.
        (["--threads", "2", "--threads=5"], "threads", "5"),
    ] as [([String], String, String)])
    func eachOptionInBothForms(arguments: [String], field: String, expected: String) throws {
        let c = try config(arguments)
        let actual: String = switch field {
        case "socket": c.socketPath
        case "data": c.dataDirectory
        case "image": c.imageBaseURL
        case "frame": String(c.maximumFrameBytes)
        case "threads": String(c.threads)
        case "log": "\(c.logLevel)"
        case "frame-timeout": String(c.frameReadTimeoutSeconds)
        case "unfinished": String(c.maximumUnfinishedFrameBytes)
        default: "?"
        }
        #expect(actual == expected)
    }

    @Test(arguments: [
        (["--threads", "0"], "--threads"),
        (["--threads", "257"], "--threads"),
        (["--threads", "-1"], "--threads"),
        (["--threads", "two"], "--threads"),
        (["--threads="], "--threads"),
        (["--threads"], "--threads"),
        (["--max-frame-bytes", "0"], "--max-frame-bytes"),
        (["--max-frame-bytes", "1073741825"], "--max-frame-bytes"),
        (["--max-frame-bytes=4MiB"], "--max-frame-bytes"),
        (["--image-base-url", "localhost:8080"], "--image-base-url"),
        (["--image-base-url="], "--image-base-url"),
        (["--log-level", "verbose"], "--log-level"),
        (["--log-level"], "--log-level"),
        (["--socket"], "--socket"),
        (["--data"], "--data"),
        (["--bogus"], "--bogus"),
        (["--bogus=1"], "--bogus"),
        (["serve"], "serve"),
        (["-v"], "-v"),
        (["--socket", "/tmp/a.sock", "--threads", "x"], "--threads"),
        (["--frame-read-timeout", "0"], "--frame-read-timeout"),
        (["--frame-read-timeout", "-1"], "--frame-read-timeout"),
        (["--frame-read-timeout=soon"], "--frame-read-timeout"),
        (["--max-unfinished-frame-bytes", "0"], "--max-unfinished-frame-bytes"),
        (["--max-unfinished-frame-bytes", "64MiB"], "--max-unfinished-frame-bytes"),
    ] as [([String], String)])
    func badArgumentsAreServerErrorsNamingTheProblem(arguments: [String], named: String) {
        let error = #expect(throws: ServerError.self) { _ = try DaemonArguments.parse(arguments) }
        #expect(error?.description.contains(named) == true, "\(String(describing: error))")
    }

    @Test(arguments: [["--help"], ["-h"], ["--threads", "2", "--help"], ["--help", "--bogus"]])
    func helpAsksForTheUsage(arguments: [String]) throws {
        guard case .help = try DaemonArguments.parse(arguments) else {
            Issue.record("\(arguments) did not ask for help")
            return
        }
    }

    @Test func theUsageNamesEveryOption() {
        for option in ["--socket", "--data", "--image-base-url", "--max-frame-bytes", "--threads", "--log-level", "--help",
                       "--frame-read-timeout", "--max-unfinished-frame-bytes", "--max-connections-per-uid", "--idle-timeout"] {
            #expect(DaemonArguments.usage.contains(option), "\(option)")
        }
    }
}
