import CurlewEngine
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

/// Requests, methods, headers, status codes and bodies against httpbin under gunicorn.
@Suite("Client against httpbin")
struct CurlewClientTests {
    @Test(arguments: allLoops)
    func getEchoesQueryAndHeaders(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let request = try CurlewRequest(
                url: "\(httpbin.baseURL)/get?name=curlew&emoji=%F0%9F%90%A6&a=1&a=2",
                headers: [("X-Custom-Header", "value with spaces"), ("Accept", "application/json")])
            let response = try await client.execute(request)
            #expect(response.status == .ok)
            #expect(response.headerFields[.contentType] == "application/json")
            let json = try response.json()
            let args = try #require(json["args"] as? [String: Any])
            #expect(args["name"] as? String == "curlew")
            #expect(args["emoji"] as? String == "🐦")
            #expect(args["a"] as? [String] == ["1", "2"])
            let headers = try #require(json["headers"] as? [String: String])
            #expect(headers["X-Custom-Header"] == "value with spaces")
            #expect(headers["User-Agent"] == nil)
            #expect(headers["Accept-Encoding"]?.contains("gzip") == true)
            #expect(response.metrics.httpVersion == .http1_1)
            #expect(response.metrics.bytesReceived == Int64(response.body.count))
        }
    }

    @Test(arguments: allLoops)
    func everyMethodWithAndWithoutBodyIsSentAsAsked(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for method in [HTTPRequest.Method.post, .put, .patch, .delete] {
                var request = try CurlewRequest(method: method, url: "\(httpbin.baseURL)/anything")
                try request.setHeader("Content-Type", "application/json")
                request.body = .bytes(Array(#"{"method":"\#(method.rawValue)"}"#.utf8))
                let json = try await client.execute(request).json()
                #expect(json["method"] as? String == method.rawValue)
                #expect(json["data"] as? String == #"{"method":"\#(method.rawValue)"}"#)
                let headers = try #require(json["headers"] as? [String: String])
                #expect(headers["Content-Type"] == "application/json")
                #expect(headers["Expect"] == nil)
            }
            for method in [HTTPRequest.Method.get, .delete, .options] {
                let request = try CurlewRequest(method: method, url: "\(httpbin.baseURL)/anything")
                let response = try await client.execute(request)
                #expect(response.status == .ok)
                if method != .options {
                    #expect(try response.json()["method"] as? String == method.rawValue)
                }
            }
        }
    }

    @Test(arguments: allLoops)
    func postPutAndPatchWithoutABodySendAnEmptyOne(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        // libcurl's defaults would read such a body from the process's stdin, on the loop thread.
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for method in [HTTPRequest.Method.post, .put, .patch] {
                let json = try await client.execute(
                    try CurlewRequest(method: method, url: "\(httpbin.baseURL)/anything")
                ).json()
                #expect(json["method"] as? String == method.rawValue)
                #expect(json["data"] as? String == "")
                let headers = try #require(json["headers"] as? [String: String])
                #expect(headers["Content-Length"] == "0", "\(method)")
                #expect(headers["Transfer-Encoding"] == nil, "\(method)")
                #expect(headers["Expect"] == nil, "\(method)")
                #expect(headers["Content-Type"] == nil, "\(method)")
            }
        }
    }

    @Test(arguments: allLoops)
    func headOfAResourceLargerThanTheBodyLimitSucceeds(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.maxResponseBodySize = 1000 }) { client in
            let head = try await client.execute(try CurlewRequest(method: .head, url: "\(httpbin.baseURL)/bytes/50000"))
            #expect(head.status == .ok)
            #expect(head.headerFields[.contentLength] == "50000")
            #expect(head.body.isEmpty)
        }
    }

    @Test(arguments: allLoops)
    func bodyWithoutContentTypeIsNotLabelledAsAForm(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let request = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/anything", body: .bytes(Array("a=1&b=2".utf8)))
            let json = try await client.execute(request).json()
            let headers = try #require(json["headers"] as? [String: String])
            #expect(headers["Content-Type"] == nil)
            #expect(json["data"] as? String == "a=1&b=2")
            #expect((json["form"] as? [String: Any])?.isEmpty ?? true)
        }
    }

    @Test(arguments: allLoops)
    func configuredUserAgentIsSentUnlessTheRequestSetsOne(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.userAgent = "curlew-tests/1.0" }) { client in
            let plain = try CurlewRequest(url: "\(httpbin.baseURL)/headers")
            let plainHeaders = try #require(try await client.execute(plain).json()["headers"] as? [String: String])
            #expect(plainHeaders["User-Agent"] == "curlew-tests/1.0")
            let own = try CurlewRequest(url: "\(httpbin.baseURL)/headers", headers: [("User-Agent", "mine/2")])
            let ownHeaders = try #require(try await client.execute(own).json()["headers"] as? [String: String])
            #expect(ownHeaders["User-Agent"] == "mine/2")
        }
    }

    @Test(arguments: allLoops)
    func nothingOfOneRequestLeaksIntoTheNextOnAReusedHandle(loop: CurlewClient.Configuration.EventLoopKind) async throws
    {
        // One loop and sequential requests, so every request reuses the same pooled easy handle. Plain GETs keep
        // their handle configured; every other shape must start from a clean one, and so must the GET after it.
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
            let plain = try CurlewRequest(url: "\(httpbin.baseURL)/anything")
            func expectPlainGET(after what: String) async throws {
                let json = try await client.execute(plain).json()
                #expect(json["method"] as? String == "GET", "after \(what)")
                #expect(json["data"] as? String == "", "after \(what)")
                let headers = try #require(json["headers"] as? [String: String])
                #expect(headers["X-Leak"] == nil, "after \(what)")
                #expect(headers["Content-Type"] == nil, "after \(what)")
            }
            try await expectPlainGET(after: "nothing")
            _ = try await client.execute(try CurlewRequest(method: .head, url: "\(httpbin.baseURL)/anything"))
            try await expectPlainGET(after: "HEAD")
            let post = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/anything",
                headers: [("X-Leak", "1"), ("Content-Type", "text/plain")],
                body: .bytes(Array("body".utf8)))
            _ = try await client.execute(post)
            try await expectPlainGET(after: "POST with headers")
            var noRedirects = try CurlewRequest(url: "\(httpbin.baseURL)/redirect/1")
            noRedirects.redirects = .disabled
            #expect(try await client.execute(noRedirects).status == .found)
            #expect(try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/redirect/1")).status == .ok)
            var tinyLimit = try CurlewRequest(url: "\(httpbin.baseURL)/bytes/5000")
            tinyLimit.maxResponseBodySize = 10
            _ = try? await client.execute(tinyLimit)
            #expect(
                try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/bytes/5000")).body.count == 5000)
            try await expectPlainGET(after: "overrides")
        }
    }

    @Test(arguments: allLoops)
    func emptyHeaderValuesAreSentEmpty(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(httpbin.baseURL)/headers", headers: [("X-Empty", "")])
            let headers = try #require(try await client.execute(request).json()["headers"] as? [String: String])
            #expect(headers["X-Empty"] == "")
        }
    }

    @Test(arguments: allLoops)
    func statusCodesAreReportedNotThrown(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for code in [200, 201, 204, 400, 404, 418, 500, 503] {
                let response = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/status/\(code)"))
                #expect(response.status.code == code)
            }
        }
    }

    @Test(arguments: allLoops)
    func headAnd204HaveNoBody(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let head = try await client.execute(try CurlewRequest(method: .head, url: "\(httpbin.baseURL)/bytes/1000"))
            #expect(head.status == .ok)
            #expect(head.body.isEmpty)
            #expect(head.headerFields[.contentLength] == "1000")
            let noContent = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/status/204"))
            #expect(noContent.status == .noContent)
            #expect(noContent.body.isEmpty)
        }
    }

    @Test(arguments: allLoops)
    func largeAndStreamedBodiesArriveWhole(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let bytes = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/bytes/102400?seed=7"))
            #expect(bytes.body.count == 102_400)
            let stream = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/stream/20"))
            let lines = stream.text.split(separator: "\n")
            #expect(lines.count == 20)
            #expect(stream.headerFields[.transferEncoding] == "chunked")
        }
    }

    @Test(arguments: allLoops)
    func basicAuthenticationSucceedsWithRightCredentialsOnly(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let good = Data("user:secret".utf8).base64EncodedString()
            let bad = Data("user:wrong".utf8).base64EncodedString()
            let url = "\(httpbin.baseURL)/basic-auth/user/secret"
            let ok = try await client.execute(
                try CurlewRequest(url: url, headers: [("Authorization", "Basic \(good)")]))
            #expect(ok.status == .ok)
            #expect(try ok.json()["authenticated"] as? Bool == true)
            let denied = try await client.execute(
                try CurlewRequest(url: url, headers: [("Authorization", "Basic \(bad)")]))
            #expect(denied.status == .unauthorized)
            #expect(denied.headerFields[HTTPField.Name("WWW-Authenticate")!]?.contains("Basic") == true)
        }
    }

    @Test(arguments: allLoops)
    func gzipDeflateAndBrotliAreDecoded(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for (path, flag) in [("gzip", "gzipped"), ("deflate", "deflated"), ("brotli", "brotli")] {
                let response = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/\(path)"))
                #expect(response.status == .ok, "\(path)")
                #expect(try response.json()[flag] as? Bool == true, "\(path)")
                #expect(response.headerFields[.contentEncoding] != nil, "\(path)")
            }
        }
    }

    @Test(arguments: allLoops)
    func decompressionCanBeDisabled(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.decompression = .disabled }) { client in
            let request = try CurlewRequest(url: "\(httpbin.baseURL)/gzip", headers: [("Accept-Encoding", "gzip")])
            let response = try await client.execute(request)
            #expect(response.body.prefix(2) == [0x1F, 0x8B])  // the gzip magic, undecoded
        }
    }

    @Test(arguments: allLoops)
    func metricsDescribeTheTransfer(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
            let request = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/post", body: .bytes(Array(repeating: 65, count: 1000)))
            let first = try await client.execute(request)
            let second = try await client.execute(request)
            #expect(!first.metrics.reusedConnection)
            #expect(second.metrics.reusedConnection)
            #expect(first.metrics.localPort == second.metrics.localPort)
            #expect(first.metrics.bytesSent == 1000)
            #expect(first.metrics.connected > .zero)
            #expect(first.metrics.firstByte >= first.metrics.connected)
            #expect(first.metrics.total >= first.metrics.firstByte)
            #expect(first.metrics.headerBytesReceived > 0)
            #expect(first.metrics.tlsHandshakeDone == .zero)
        }
    }
}

@Suite("Default configuration")
struct DefaultConfigurationTests {
    /// `taskset` and cpusets limit the CPUs a process may use; one loop per CPU of the machine would put
    /// several loops on one core.
    @Test
    func theDefaultLoopCountIsTheNumberOfCPUsTheProcessMayRunOn() throws {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") })
        var allowed = 0
        for range in line.dropFirst("Cpus_allowed_list:".count).split(separator: ",") {
            let bounds = range.trimmingCharacters(in: .whitespaces).split(separator: "-").compactMap { Int($0) }
            allowed += bounds.count == 2 ? bounds[1] - bounds[0] + 1 : 1
        }
        #expect(CurlewClient.Configuration().loopCount == allowed)
    }
}
