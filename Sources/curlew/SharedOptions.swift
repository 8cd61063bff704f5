import ArgumentParser
import CurlewEngine
import Foundation

/// The options `bench` and `upload` share: TLS trust, client certificates and progress reporting.
struct SharedOptions: ParsableArguments {
    @Option(name: .customLong("cacert"), help: "A PEM file of CA certificates to trust for https.")
    var caFile: String?

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Do not verify the server's certificate.")
    var insecure = false

    @Option(
        name: .customLong("cert"), help: "A PEM client certificate for https servers that ask for one (mutual TLS).")
    var clientCertificate: String?

    @Option(name: .customLong("key"), help: "The PEM private key of --cert (default: the --cert file itself).")
    var clientKey: String?

    @Option(name: .customLong("progress-interval"), help: "How often progress is reported.")
    var progressInterval: DurationArgument = DurationArgument(.seconds(1), text: "1s")

    @Flag(name: .customLong("no-progress"), help: "Print no progress, only the summary.")
    var noProgress = false

    func validate() throws {
        if progressInterval.duration < .milliseconds(10) {
            throw ValidationError("--progress-interval must be at least 10ms")
        }
        if clientKey != nil && clientCertificate == nil { throw ValidationError("--key needs --cert") }
        for (option, path) in [("--cert", clientCertificate), ("--key", clientKey)] {
            if let path, !FileManager.default.isReadableFile(atPath: path) {
                throw ValidationError("cannot read \(option) \(path.debugDescription)")
            }
        }
    }

    /// Fails before anything starts when the libcurl this process loaded is older than the engine supports.
    func requireSupportedLibcurl() throws {
        do {
            try CurlewClient.requireSupportedLibcurl()
        } catch let error as CurlewError {
            throw CommandFailure(error.detail)
        }
    }

    func applyTLS(to configuration: inout CurlewClient.Configuration) {
        configuration.tls.caFile = caFile
        configuration.tls.clientCertificateFile = clientCertificate
        configuration.tls.clientKeyFile = clientKey
        if insecure {
            configuration.tls.verifyPeer = false
            configuration.tls.verifyHost = false
        }
    }
}
