import ArgumentParser
import CurlewEngine

/// The options `bench` and `upload` share: TLS trust and progress reporting.
struct SharedOptions: ParsableArguments {
    @Option(name: .customLong("cacert"), help: "A PEM file of CA certificates to trust for https.")
    var caFile: String?

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Do not verify the server's certificate.")
    var insecure = false

    @Option(name: .customLong("progress-interval"), help: "How often progress is reported.")
    var progressInterval: DurationArgument = DurationArgument(.seconds(1), text: "1s")

    @Flag(name: .customLong("no-progress"), help: "Print no progress, only the summary.")
    var noProgress = false

    func validate() throws {
        if progressInterval.duration < .milliseconds(10) { throw ValidationError("--progress-interval must be at least 10ms") }
    }

    func applyTLS(to configuration: inout CurlewClient.Configuration) {
        configuration.tls.caFile = caFile
        if insecure {
            configuration.tls.verifyPeer = false
            configuration.tls.verifyHost = false
        }
    }
}
