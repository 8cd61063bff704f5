import CurlewLoopbackServer
import Foundation
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A real nginx on 127.0.0.1 with HTTP/1.1, TLS + HTTP/2, cleartext HTTP/2, a hostname-mismatch
/// TLS port and a port that requires a client certificate, shared by every test in the process.
///
/// Everything (config, test CA, certificates, temp paths, WebDAV folder) lives in a fresh
/// temporary directory that is removed when the test process exits. Every port serves:
/// - `/small`: 200 with ``CurlewLoopbackServer/LoopbackServer/smallBody`` (100 bytes, `text/plain`).
/// - `/json`: ``CurlewLoopbackServer/LoopbackServer/jsonBody`` as `application/json`, gzip-compressed
///   (then chunked, no `content-length`) when the request accepts gzip.
/// - `/dav/...`: WebDAV `PUT`/`DELETE`/`MKCOL` (and `GET`) on ``scratchDirectory``.
/// - `/upload`: `POST`/`PUT` of any size; answers `{"bytes": N}` only after reading every byte.
/// - `/hits/...`: 200 `hit` for any method, each request logged to ``hitsAccessLogPath``.
///
/// Needs Debian's nginx (`apt-get install nginx-light`, built with http_v2 and dav) and the
/// openssl CLI. `CURLEW_NGINX` and `CURLEW_OPENSSL` override the executables.
public final class NginxServer: Sendable {
    /// Plain HTTP/1.1.
    public let httpPort: Int
    /// TLS with ALPN h2 and http/1.1; the certificate is valid for 127.0.0.1, ::1 and localhost.
    public let httpsPort: Int
    /// Cleartext HTTP/2 with prior knowledge only (nginx does not support `Upgrade: h2c`).
    public let h2cPort: Int
    /// TLS with a certificate from the same CA but only for `wrong.invalid`.
    public let mismatchPort: Int
    /// TLS (HTTP/1.1 and h2) that requires a client certificate signed by the test CA (`ssl_verify_client on`);
    /// `/hits/` here logs the client certificate's subject in place of the `Host`.
    public let mutualTLSPort: Int
    /// A client certificate (PEM) and its key, signed by the test CA, for ``mutualTLSPort``.
    public let clientCertificateFile: String
    public let clientKeyFile: String
    /// PEM file of the CA that signed both certificates, generated for this test process.
    public let caFile: String
    /// The folder behind `/dav/`: a `PUT /dav/a/b` lands in `scratchDirectory + "/a/b"`.
    public let scratchDirectory: String
    /// Every request to `/dav/` as one line, `METHOD STATUS REQUEST-URI` (the URI as sent, still
    /// percent-encoded), written unbuffered, so tests can count what reached the server.
    public var davAccessLogPath: String { davLog.path }
    /// Every request to `/hits/` as one line, `MSEC CONNECTION METHOD STATUS REQUEST-URI HOST LENGTH TAG ADDRESS`:
    /// when nginx logged it in seconds (these requests are answered as they arrive, so that is their arrival),
    /// nginx's connection serial number, the `Host` the request named, its length in bytes (line, headers, body),
    /// its `X-Test-Tag` ("-" without one) and the client's address (`unix:` over ``httpUnixSocketPath`` and
    /// ``httpsUnixSocketPath``).
    /// Written unbuffered at the end of each request, so tests count arrivals, connections and targets
    /// server-side (wait for the count: a line may follow its response).
    public var hitsAccessLogPath: String { hitsLog.path }
    /// ``davAccessLogPath``, read as it grows and grouped by `/dav/FOLDER/`.
    public let davLog: AccessLogIndex
    /// ``hitsAccessLogPath``, read as it grows and grouped by `/hits/MARKER/`.
    public let hitsLog: AccessLogIndex
    private let process: SupervisedProcess

    /// A Unix domain socket that serves what ``httpPort`` serves.
    public var httpUnixSocketPath: String { directory + "/http.sock" }
    /// A Unix domain socket that serves what ``httpsPort`` serves, with the same certificate.
    public var httpsUnixSocketPath: String { directory + "/https.sock" }
    /// A Unix domain socket with ``httpsPort``'s certificate that speaks TLS 1.2 only (`ssl_protocols TLSv1.2`).
    public var tls12OnlyUnixSocketPath: String { directory + "/tls12.sock" }
    /// The public-key pin of the certificate of ``httpsPort``: `sha256//` and the base64 SHA-256 of its DER
    /// SubjectPublicKeyInfo, as `CURLOPT_PINNEDPUBLICKEY` takes it.
    public var serverPublicKeyPin: String {
        let digest = FileManager.default.contents(atPath: directory + "/certs/server.spki.sha256") ?? Data()
        return "sha256//" + digest.base64EncodedString()
    }
    private var directory: String { (scratchDirectory as NSString).deletingLastPathComponent }

    /// `http://127.0.0.1:httpPort`
    public var httpBaseURL: String { "http://127.0.0.1:\(self.httpPort)" }
    /// `https://127.0.0.1:httpsPort`
    public var httpsBaseURL: String { "https://127.0.0.1:\(self.httpsPort)" }
    /// `http://127.0.0.1:h2cPort`
    public var h2cBaseURL: String { "http://127.0.0.1:\(self.h2cPort)" }
    /// `https://127.0.0.1:mismatchPort`
    public var mismatchBaseURL: String { "https://127.0.0.1:\(self.mismatchPort)" }
    /// `https://127.0.0.1:mutualTLSPort`
    public var mutualTLSBaseURL: String { "https://127.0.0.1:\(self.mutualTLSPort)" }

    private init(ports: NginxPorts, caFile: String, scratchDirectory: String, process: SupervisedProcess) {
        self.httpPort = ports.http
        self.httpsPort = ports.https
        self.h2cPort = ports.h2c
        self.mismatchPort = ports.mismatch
        self.mutualTLSPort = ports.mutualTLS
        self.clientCertificateFile = (caFile as NSString).deletingLastPathComponent + "/client.pem"
        self.clientKeyFile = (caFile as NSString).deletingLastPathComponent + "/client.key"
        self.caFile = caFile
        self.scratchDirectory = scratchDirectory
        self.process = process
        let logDirectory = (scratchDirectory as NSString).deletingLastPathComponent
        self.davLog = AccessLogIndex(path: logDirectory + "/dav-access.log", uriField: 2)
        self.hitsLog = AccessLogIndex(path: logDirectory + "/hits-access.log", uriField: 4)
    }

    private static let startup = StartOnce { try await NginxServer.start() }

    /// The process-wide instance, started on the first call; concurrent callers share one start, and a failed
    /// start is rethrown to every later caller.
    public static func shared() async throws -> NginxServer {
        try await startup.value
    }

    private static func start() async throws -> NginxServer {
        let nginx =
            ProcessInfo.processInfo.environment["CURLEW_NGINX"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: nginx) else {
            throw TestSupportError("nginx not found at \(nginx): `apt-get install nginx-light` (or set CURLEW_NGINX)")
        }
        let directory = try TemporaryDirectory.make(prefix: "curlew-nginx")
        do {
            return try await self.start(nginx: nginx, directory: directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    private static func start(nginx: String, directory: String) async throws -> NginxServer {
        let files = FileManager.default
        for subdirectory in [
            "dav", "html", "certs", "tmp/client_body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi",
        ] {
            try files.createDirectory(atPath: directory + "/" + subdirectory, withIntermediateDirectories: true)
        }
        try LoopbackServer.jsonBody.write(toFile: directory + "/html/data.json", atomically: true, encoding: .utf8)
        let certificates = directory + "/certs"
        try await NIOThreadPool.singleton.runIfActive { try TestCertificates.generate(in: certificates) }
        try NginxConfig.locations(prefix: directory).write(
            toFile: directory + "/locations.conf", atomically: true, encoding: .utf8)

        // nginx cannot inherit listening sockets, so ports are picked up front; another process
        // can grab one in between, hence the retry on "Address already in use".
        let attempts = 5
        for attempt in 1...attempts {
            let ports = try NginxPorts.allocate()
            try NginxConfig.main(prefix: directory, ports: ports, runAsRoot: geteuid() == 0)
                .write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
            let process = try await SupervisedProcess.launch(
                name: "nginx",
                program: [nginx, "-p", directory + "/", "-c", directory + "/nginx.conf", "-e", "stderr"],
                listen: 0,
                stderrPath: directory + "/stderr-\(attempt).log",
                cleanupDirectory: directory
            )
            do {
                try await process.waitUntilReady {
                    Probe.httpStatus(port: ports.http, path: "/small") == 200
                        && Probe.acceptsConnections(port: ports.https)
                        && Probe.acceptsConnections(port: ports.h2c)
                        && Probe.acceptsConnections(port: ports.mismatch)
                        && Probe.acceptsConnections(port: ports.mutualTLS)
                }
                return NginxServer(
                    ports: ports, caFile: certificates + "/ca.pem", scratchDirectory: directory + "/dav",
                    process: process)
            } catch let exited as ServerExited
                where exited.tail.contains("Address already in use") && attempt < attempts
            {
                continue
            }
        }
        throw TestSupportError("nginx: could not bind free ports after \(attempts) attempts")
    }
}

struct NginxPorts {
    let http: Int
    let https: Int
    let h2c: Int
    let mismatch: Int
    let mutualTLS: Int

    static func allocate() throws -> NginxPorts {
        var ports: [Int] = []
        while ports.count < 5 {
            let port = try FreePort.allocate()
            if !ports.contains(port) {
                ports.append(port)
            }
        }
        return NginxPorts(http: ports[0], https: ports[1], h2c: ports[2], mismatch: ports[3], mutualTLS: ports[4])
    }
}

enum NginxConfig {
    static func main(prefix: String, ports: NginxPorts, runAsRoot: Bool) -> String {
        """
        # Generated by CurlewTestSupport for one test process; deleted when that process exits.
        daemon off;
        # PROPFIND for the WebDAV folder (curlew sync lists it); Debian's libnginx-mod-http-dav-ext.
        load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
        master_process on;
        worker_processes 1;
        \(runAsRoot ? "# Workers would otherwise drop to 'nobody' and could not write the 0700 temp dir.\nuser root root;" : "")
        pid \(prefix)/nginx.pid;
        error_log stderr;
        worker_rlimit_nofile 16384;

        events {
            worker_connections 8192;
        }

        http {
            access_log off;
            log_format curlew_dav '$request_method $status $request_uri';
            log_format curlew_hits '$msec $connection $request_method $status $request_uri $host $request_length $http_x_test_tag $remote_addr';
            log_format curlew_mtls '$msec $connection $request_method $status $request_uri $ssl_client_s_dn $request_length';
            types {
                application/json json;
                text/plain txt;
            }
            default_type application/octet-stream;
            server_tokens off;
            keepalive_requests 1000000;
            keepalive_timeout 300s;
            http2_max_concurrent_streams 256;
            client_max_body_size 0;
            client_body_temp_path \(prefix)/tmp/client_body;
            proxy_temp_path \(prefix)/tmp/proxy;
            fastcgi_temp_path \(prefix)/tmp/fastcgi;
            uwsgi_temp_path \(prefix)/tmp/uwsgi;
            scgi_temp_path \(prefix)/tmp/scgi;

            server {
                listen 127.0.0.1:\(ports.http);
                listen unix:\(prefix)/http.sock;
                include \(prefix)/locations.conf;
            }
            server {
                listen 127.0.0.1:\(ports.https) ssl http2;
                listen unix:\(prefix)/https.sock ssl http2;
                ssl_certificate \(prefix)/certs/server.pem;
                ssl_certificate_key \(prefix)/certs/server.key;
                include \(prefix)/locations.conf;
            }
            server {
                listen unix:\(prefix)/tls12.sock ssl;
                ssl_protocols TLSv1.2;
                ssl_certificate \(prefix)/certs/server.pem;
                ssl_certificate_key \(prefix)/certs/server.key;
                include \(prefix)/locations.conf;
            }
            server {
                # No ssl: nginx speaks HTTP/2 with prior knowledge here, and only that.
                listen 127.0.0.1:\(ports.h2c) http2;
                include \(prefix)/locations.conf;
            }
            server {
                listen 127.0.0.1:\(ports.mismatch) ssl http2;
                ssl_certificate \(prefix)/certs/mismatch.pem;
                ssl_certificate_key \(prefix)/certs/mismatch.key;
                include \(prefix)/locations.conf;
            }
            server {
                listen 127.0.0.1:\(ports.mutualTLS) ssl http2;
                ssl_certificate \(prefix)/certs/server.pem;
                ssl_certificate_key \(prefix)/certs/server.key;
                ssl_client_certificate \(prefix)/certs/ca.pem;
                ssl_verify_client on;
                location /hits/ {
                    access_log \(prefix)/hits-access.log curlew_mtls;
                    default_type text/plain;
                    return 200 "hit\\n";
                }
            }

            # Sink behind /upload, on a unix socket so it needs no TCP port (and cannot race for one).
            map $content_length $curlew_upload_bytes {
                "" 0;
                default $content_length;
            }
            server {
                listen unix:\(prefix)/upload.sock;
                location / {
                    default_type application/json;
                    return 200 '{"bytes": $curlew_upload_bytes}\\n';
                }
            }
        }

        """
    }

    /// `/redirect-CODE?target=HOST:PORT` answers CODE with `Location: http://HOST:PORT/landed`, for the tests of the
    /// credential rule on https → http redirects.
    static let credentialRedirects = [301, 302, 303, 307, 308].map { code in
        "location = /redirect-\(code) { return \(code) http://$arg_target/landed; }"
    }.joined(separator: "\n")

    static func locations(prefix: String) -> String {
        """
        location = /small {
            default_type text/plain;
            return 200 "\(LoopbackServer.smallBody)";
        }

        location = /json {
            alias \(prefix)/html/data.json;
            types { }
            default_type application/json;
            gzip on;
            gzip_types application/json;
            gzip_min_length 0;
        }

        location /dav/ {
            alias \(prefix)/dav/;
            dav_methods PUT DELETE MKCOL;
            dav_ext_methods PROPFIND OPTIONS;
            create_full_put_path on;
            dav_access user:rw group:rw all:r;
            client_max_body_size 0;
            access_log \(prefix)/dav-access.log curlew_dav;
        }

        \(credentialRedirects)

        location /hits/ {
            access_log \(prefix)/hits-access.log curlew_hits;
            default_type text/plain;
            return 200 "hit\\n";
        }

        location = /upload {
            # nginx's own handlers (return, static) answer without reading the body, so the
            # body is proxied to a sink instead. proxy_request_buffering stays on (the default)
            # on purpose: nginx then reads the whole request body (to memory, then to
            # tmp/client_body) before it contacts the sink, so the client can never see the
            # response before its last byte was consumed, whether it sent a content-length or
            # chunked (HTTP/1.1) or DATA frames (HTTP/2). The sink answers with the byte count.
            client_max_body_size 0;
            client_body_buffer_size 1m;
            proxy_request_buffering on;
            proxy_pass http://unix:\(prefix)/upload.sock:;
        }

        """
    }
}

/// A throwaway CA plus two server certificates, made with the openssl CLI at test time so no
/// key material is committed and nothing expires in the repository.
enum TestCertificates {
    static func generate(in directory: String) throws {
        let openssl =
            ProcessInfo.processInfo.environment["CURLEW_OPENSSL"].flatMap { $0.isEmpty ? nil : $0 } ?? "openssl"
        let log = directory + "/openssl.log"
        func run(_ arguments: String...) throws {
            do {
                try Spawn.run([openssl] + arguments, stderrPath: log)
            } catch {
                throw TestSupportError("\(error)\nhint: `apt-get install openssl` (or set CURLEW_OPENSSL)")
            }
        }
        func path(_ name: String) -> String { directory + "/" + name }

        try """
        [req]
        distinguished_name = dn
        prompt = no
        x509_extensions = ca_extensions
        [dn]
        CN = Curlew Test CA
        [ca_extensions]
        basicConstraints = critical, CA:TRUE
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash

        """.write(toFile: path("ca.cnf"), atomically: true, encoding: .utf8)

        try run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("ca.key"))
        try run(
            "req", "-x509", "-new", "-config", path("ca.cnf"), "-key", path("ca.key"), "-sha256", "-days", "30", "-out",
            path("ca.pem"))

        let leaves = [
            ("server", "127.0.0.1", "serverAuth", "IP:127.0.0.1, IP:::1, DNS:localhost"),
            ("mismatch", "wrong.invalid", "serverAuth", "DNS:wrong.invalid"),
            ("client", "curlew-test-client", "clientAuth", "DNS:curlew-test-client"),
        ]
        for (name, commonName, usage, subjectAlternativeNames) in leaves {
            try """
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = \(usage)
            subjectAltName = \(subjectAlternativeNames)
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid

            """.write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
            try run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("\(name).key"))
            try run(
                "req", "-new", "-config", path("ca.cnf"), "-key", path("\(name).key"), "-subj", "/CN=\(commonName)",
                "-out", path("\(name).csr"))
            let serial = "0x" + String(UInt64.random(in: 1...UInt64(Int64.max)), radix: 16)
            try run(
                "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-set_serial", serial, "-sha256", "-days", "30", "-extfile", path("\(name).ext"), "-out",
                path("\(name).pem")
            )
        }
        // The server key's pin (NginxServer.serverPublicKeyPin): SHA-256 of the DER SubjectPublicKeyInfo.
        try run("pkey", "-in", path("server.key"), "-pubout", "-outform", "DER", "-out", path("server.spki.der"))
        try run("dgst", "-sha256", "-binary", "-out", path("server.spki.sha256"), path("server.spki.der"))
    }
}
