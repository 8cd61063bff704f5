// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Curlew",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CurlewEngine", targets: ["CurlewEngine"]),
        .library(name: "Curlew", targets: ["Curlew"]),
        .library(name: "CurlewTesting", targets: ["CurlewTesting"]),
        // Integrations, each a product of its own so the engine's graph stays lean.
        .library(name: "CurlewOpenAPI", targets: ["CurlewOpenAPI"]),
        .library(name: "CurlewServiceLifecycle", targets: ["CurlewServiceLifecycle"]),
        // The connection pool's gauges and counters for whichever swift-metrics backend the process bootstrapped.
        .library(name: "CurlewMetrics", targets: ["CurlewMetrics"]),
        // The command's libraries: shard arithmetic, shared by the load generator and the upload pipeline.
        .library(name: "CurlewSharding", targets: ["CurlewSharding"]),
        // The S3 client on its own (SigV4, multipart, resumable parts), and the upload pipeline built on it.
        .library(name: "CurlewS3", targets: ["CurlewS3"]),
        .library(name: "CurlewUpload", targets: ["CurlewUpload"]),
        // The load generator behind `curlew bench`: shapes, thresholds, the runner, HdrHistogram summaries, merges.
        .library(name: "CurlewLoad", targets: ["CurlewLoad"]),
        // `curlew bench --prometheus`: a running load test's counts and latencies at /metrics (swift-prometheus).
        .library(name: "CurlewLoadPrometheus", targets: ["CurlewLoadPrometheus"]),
        // `curlew bench --otlp`: the same counts and latencies pushed to an OpenTelemetry collector (swift-otel).
        // Empty without the OTLP trait.
        .library(name: "CurlewLoadOTLP", targets: ["CurlewLoadOTLP"]),
        .executable(name: "curlew", targets: ["curlew"]),
    ],
    traits: [
        // swift-otel and what it needs (AsyncHTTPClient, swift-nio-ssl, swift-protobuf) take minutes to build: CI's
        // second build, on the backports suite's libcurl, leaves them out with --disable-default-traits.
        .trait(name: "OTLP", description: "`curlew bench --otlp` and the CurlewLoadOTLP library (swift-otel)."),
        .default(enabledTraits: ["OTLP"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // The engine's client spans (small: Tracing, Instrumentation and swift-service-context only).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // The route layer's environments: YAML (and JSON, a subset) configuration files.
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        // CurlewOpenAPI and CurlewServiceLifecycle only.
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // `make docs` only: the DocC catalogs of CurlewEngine, Curlew and CurlewTesting.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        // SHA-256, HMAC and MD5: CurlewS3's SigV4 signer and checksums; the tests' independent digests.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        // CurlewLoadPrometheus (`curlew bench --prometheus`); in the tests, a real Prometheus backend for
        // swift-metrics, whose exposition the pool-metrics tests scrape.
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // CurlewLoadOTLP only, and only its OTLP/HTTP exporter: gRPC would add minutes of build for a second protocol.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Tests only: an independent multipart parser.
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibCurl",
            path: "CLibCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev", "zlib1g-dev"])]
        ),
        .target(
            name: "CurlewEngine",
            dependencies: [
                "CLibCurl",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewLoopbackServer",
            dependencies: [
                // For zlib: /upload inflates gzip-encoded request bodies before hashing them.
                "CLibCurl",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The embedded loopback server as a process of its own, for benchmarks that point other tools at it.
        .executableTarget(
            name: "curlew-loopback-server",
            dependencies: ["CurlewLoopbackServer"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "Curlew",
            dependencies: [
                .target(name: "CurlewEngine"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewTesting",
            dependencies: [
                "Curlew",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewOpenAPI",
            dependencies: [
                "CurlewEngine",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewServiceLifecycle",
            dependencies: [
                "CurlewEngine",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .target(name: "CurlewSharding", swiftSettings: strictSettings),
        .target(
            name: "CurlewMetrics",
            dependencies: [
                "CurlewEngine",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewS3",
            dependencies: [
                "CurlewEngine",
                // SHA-256, HMAC and MD5 for SigV4 and checksums: here, not in the engine, which needs none of them.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewUpload",
            dependencies: [
                "CurlewEngine",
                "CurlewS3",
                "CurlewSharding",
                // The SHA-256 of a piped stream (already in the graph through CurlewS3).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewLoad",
            dependencies: [
                "CurlewEngine",
                "CurlewSharding",
                // zlib, for HdrHistogram's compressed interval-log encoding.
                "CLibCurl",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // Header fields of `--check header …` (already in the graph through the engine).
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewLoadPrometheus",
            dependencies: [
                "CurlewLoad",
                "CurlewSharding",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewLoadOTLP",
            dependencies: [
                "CurlewEngine",
                "CurlewLoad",
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLP"])),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "curlew",
            dependencies: [
                "CurlewEngine",
                "CurlewSharding",
                "CurlewS3",
                "CurlewUpload",
                "CurlewLoad",
                "CurlewLoadPrometheus",
                "CurlewLoadOTLP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // libcurl's version info for `curlew version`.
                "CLibCurl",
                "CurlewLoopbackServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewTestSupport",
            dependencies: [
                "CurlewLoopbackServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/CurlewTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewEngineTests",
            dependencies: [
                "CurlewEngine",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                "CLibCurl",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewMetricsTests",
            dependencies: [
                "CurlewMetrics",
                "CurlewEngine",
                "CurlewTestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewTests",
            dependencies: [
                "Curlew",
                "CurlewTesting",
                "CurlewEngine",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewOpenAPITests",
            dependencies: [
                "CurlewOpenAPI",
                "CurlewEngine",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The generated client (Tests/CurlewOpenAPITests/Generated) is committed, not generated at build time.
            exclude: ["Generated/openapi.yaml", "Generated/openapi-generator-config.yaml", "Generated/README.md"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewServiceLifecycleTests",
            dependencies: [
                "CurlewServiceLifecycle",
                "CurlewEngine",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Fuzzing (`make fuzz`): each place outside input enters, with its property; the libFuzzer runner and the weak
        // stand-in for libFuzzer's driver that lets the runner build (as a corpus replayer) without the fuzzer.
        .target(
            name: "CurlewFuzzProperties",
            dependencies: [
                "CurlewEngine",
                "CurlewS3",
                "CurlewUpload",
                "CurlewLoad",
                "CurlewSharding",
                "CLibCurl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "MultipartKit", package: "multipart-kit"),
            ],
            path: "Tests/Fuzz/Properties",
            swiftSettings: strictSettings
        ),
        .target(name: "CFuzzerDriverFallback", path: "Tests/Fuzz/DriverFallback"),
        .executableTarget(
            name: "curlew-fuzz",
            dependencies: ["CurlewFuzzProperties", "CFuzzerDriverFallback"],
            path: "Tests/Fuzz/Runner",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewFuzzCorpusTests",
            dependencies: ["CurlewFuzzProperties"],
            swiftSettings: strictSettings
        ),
        // `make soak`: the engine under a fault-injecting server (Tests/servers/fault_server.py) for a bounded time,
        // on every loop and both HTTP versions, counting wrong bodies, failures by cause and RSS over time.
        .executableTarget(
            name: "curlew-soak",
            dependencies: ["CurlewEngine", "CurlewTestSupport"],
            path: "Tests/Soak",
            swiftSettings: strictSettings
        ),
        // Stands in for a server framework that exports `Route` and `Environment` (Vapor, Hummingbird).
        .target(name: "FrameworkNames", path: "Tests/FrameworkNames", swiftSettings: strictSettings),
        .testTarget(
            name: "CurlewNameCollisionTests",
            dependencies: ["Curlew", "FrameworkNames"],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "CurlewShardingTests", dependencies: ["CurlewSharding"], swiftSettings: strictSettings),
        .testTarget(
            name: "CurlewS3Tests",
            dependencies: [
                "CurlewS3",
                "CurlewEngine",
                "CurlewTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewUploadTests",
            dependencies: [
                "CurlewUpload",
                "CurlewS3",
                "CurlewSharding",
                "CurlewEngine",
                "CurlewTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewLoadTests",
            dependencies: [
                "CurlewLoad",
                "CurlewEngine",
                "CurlewSharding",
                // zlib, to inflate the HdrHistogram encoding in its test.
                "CLibCurl",
                "CurlewTestSupport",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewLoadPrometheusTests",
            dependencies: [
                "CurlewLoadPrometheus",
                "CurlewLoad",
                "CurlewEngine",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewLoadOTLPTests",
            dependencies: [
                "CurlewLoadOTLP",
                "CurlewLoad",
                "CurlewEngine",
                "CurlewSharding",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CurlewCommandTests",
            dependencies: [
                // What only a process shows (exit statuses, signals, stdout and stderr, Slurm), and the command's own
                // option types, unit-tested.
                "curlew",
                "CurlewSharding",
                // The upload summary that the sharded-upload tests decode, and the load generator's merge types.
                "CurlewUpload",
                "CurlewLoad",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // To read the Kubernetes manifests under deploy/ in their test.
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
