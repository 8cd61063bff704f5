import Foundation
import Testing

@Suite struct VersionCommandTests {
    @Test func versionFlagAndSubcommandNameTheLibcurlInUse() async throws {
        // The independent source of truth: the libcurl the binary loads (ldd, so a build against another libcurl
        // than the system's is checked against that one), asked for its version by Python's ctypes.
        let binary = try CurlewBinary.path()
        let ldd = try await CurlewBinary.runProgram(["ldd", binary])
        let libraryLine = try #require(
            ldd.stdout.split(separator: "\n").first { $0.contains("libcurl.so") }, "\(ldd.stdout)")
        let libraryPath = try #require(libraryLine.split(separator: " ").first { $0.hasPrefix("/") }.map(String.init))
        let script =
            "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.curl_version.restype = ctypes.c_char_p; "
            + "print(lib.curl_version().decode().split()[0].split('/')[1])"
        let loaded = try await CurlewBinary.runProgram(["python3", "-c", script, libraryPath])
        let libcurl = loaded.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!libcurl.isEmpty, "\(loaded.stderr)")

        let flag = try await CurlewBinary.run(["--version"])
        #expect(flag.status == 0)
        #expect(flag.stdout.hasPrefix("curlew "))
        #expect(flag.stdout.contains("libcurl \(libcurl)"), "\(flag.stdout)")

        let command = try await CurlewBinary.run(["version"])
        #expect(command.status == 0)
        let lines = command.stdout.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("libcurl") && $0.hasSuffix(libcurl) })
        let features = try #require(lines.first { $0.hasPrefix("features") })
        #expect(features.contains("HTTP2") && features.contains("SSL"))
        #expect(lines.contains { $0.hasPrefix("protocols") && $0.contains("https") })
        #expect(lines.contains { $0.hasPrefix("requires") && $0.hasSuffix("libcurl 7.80.0 or newer") })
    }

    @Test(arguments: [["--help"], ["bench", "--help"], ["version", "--help"]])
    func helpWrapsCleanly(arguments: [String]) async throws {
        let output = try await CurlewBinary.run(arguments)
        #expect(output.status == 0)
        let lines = output.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        for line in lines {
            #expect(line.count <= 80, "too long: \(line)")
        }
        // ArgumentParser fills paragraphs to 80 columns; a hard line break inside one would leave a short line in
        // the middle of a paragraph. So in the discussion a line ends only where the next word would not fit.
        let discussion = lines.prefix { !$0.hasPrefix("USAGE:") }
        for (line, next) in zip(discussion, discussion.dropFirst()) where !line.isEmpty && !next.isEmpty {
            #expect(
                line.count + 1 + (next.split(separator: " ").first?.count ?? 0) > 76,
                "a break inside a paragraph: \(line)")
        }
    }

    @Test func benchHelpSaysWhatFailsAndWhatEachExitStatusMeans() async throws {
        let output = try await CurlewBinary.run(["bench", "--help"])
        let text = output.stdout.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: " ")
        #expect(text.contains("A request fails when"))
        for status in ["0 when", "1 when", "64 for bad arguments", "98 when", "99 when", "130 when"] {
            #expect(text.contains(status), "help does not explain exit status \(status)")
        }
    }
}
