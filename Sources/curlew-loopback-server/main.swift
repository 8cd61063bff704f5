import CurlewLoopbackServer
import Foundation

// The loopback server that `curlew bench` and `curlew upload` embed, on its own: a known server for the benchmarks
// that run other tools against it (the accuracy scenario's `/freeze/` route). It prints `listening URL` once bound and
// serves until it is stopped by a signal.
//
//     curlew-loopback-server [--port N] [--threads N]

func option(_ name: String) -> Int? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else {
        return nil
    }
    return Int(CommandLine.arguments[index + 1])
}

let server = try await LoopbackServer.start(port: option("--port") ?? 0, threads: option("--threads") ?? 1)
// Unbuffered, so a script reading the pipe sees the line at once.
FileHandle.standardOutput.write(Data("listening \(server.baseURL)\n".utf8))
while true { try await Task.sleep(for: .seconds(3600)) }
