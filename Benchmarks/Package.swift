// swift-tools-version: 6.1
// Side-by-side benchmark clients for Curlew. A package of its own so that AsyncHTTPClient
// never enters the library's dependency graph. See run.sh.
//
// CURLEW_BENCH_NO_ENGINE=1 leaves out the root package and bench-curlew, so the other
// clients can be built while the engine does not compile (run.sh falls back to it).
import PackageDescription

let withEngine = Context.environment["CURLEW_BENCH_NO_ENGINE"] == nil

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

var dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    // S9: AsyncHTTPClient's OpenAPI transport, beside Curlew's.
    .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", exact: "1.5.0"),
    .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
    .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    // S1 with a metrics backend: bench-curlew --pool-metrics-every publishes the pool to a Prometheus registry.
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
]

var products: [Product] = [
    .executable(name: "bench-ahc", targets: ["BenchAHC"]),
    .executable(name: "bench-urlsession", targets: ["BenchURLSession"]),
    .executable(name: "bench-ahc-upload", targets: ["BenchAHCUpload"]),
    .executable(name: "bench-urlsession-upload", targets: ["BenchURLSessionUpload"]),
    .executable(name: "bench-openapi-ahc", targets: ["BenchOpenAPIAHC"]),
]

var targets: [Target] = [
    .target(
        name: "BenchSupport",
        dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "BenchAHC",
        dependencies: [
            "BenchSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ],
        path: "Sources/bench-ahc",
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "BenchURLSession",
        dependencies: ["BenchSupport"],
        path: "Sources/bench-urlsession",
        swiftSettings: swiftSettings
    ),
    // S4-S6 upload clients: one request of one file (see run.sh).
    .executableTarget(
        name: "BenchAHCUpload",
        dependencies: [
            "BenchSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
        ],
        path: "Sources/bench-ahc-upload",
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "BenchOpenAPIAHC",
        dependencies: [
            "BenchSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ],
        path: "Sources/bench-openapi-ahc",
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "BenchURLSessionUpload",
        dependencies: ["BenchSupport"],
        path: "Sources/bench-urlsession-upload",
        swiftSettings: swiftSettings
    ),
]

if withEngine {
    dependencies += [
        .package(name: "Curlew", path: "..")
    ]
    products.append(.executable(name: "bench-curlew", targets: ["BenchCurlew"]))
    products.append(.executable(name: "bench-curlew-upload", targets: ["BenchCurlewUpload"]))
    targets.append(
        .executableTarget(
            name: "BenchCurlewUpload",
            dependencies: [
                "BenchSupport",
                .product(name: "CurlewEngine", package: "Curlew"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/bench-curlew-upload",
            swiftSettings: swiftSettings
        )
    )
    targets.append(
        .executableTarget(
            name: "BenchCurlew",
            dependencies: [
                "BenchSupport",
                .product(name: "CurlewEngine", package: "Curlew"),
                .product(name: "CurlewMetrics", package: "Curlew"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/bench-curlew",
            swiftSettings: swiftSettings
        )
    )
    // S9 through Curlew's OpenAPI transport.
    products.append(.executable(name: "bench-openapi-curlew", targets: ["BenchOpenAPICurlew"]))
    targets.append(
        .executableTarget(
            name: "BenchOpenAPICurlew",
            dependencies: [
                "BenchSupport",
                .product(name: "CurlewEngine", package: "Curlew"),
                .product(name: "CurlewOpenAPI", package: "Curlew"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/bench-openapi-curlew",
            swiftSettings: swiftSettings
        )
    )
    // S1 and S3 through the route layer (Route + HTTPProvider), and the engine with the same decoding for S3.
    products.append(.executable(name: "bench-curlew-route", targets: ["BenchCurlewRoute"]))
    targets.append(
        .executableTarget(
            name: "BenchCurlewRoute",
            dependencies: [
                "BenchSupport",
                .product(name: "Curlew", package: "Curlew"),
                .product(name: "CurlewEngine", package: "Curlew"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/bench-curlew-route",
            swiftSettings: swiftSettings
        )
    )
}

let package = Package(
    name: "CurlewBenchmarks",
    platforms: [.macOS(.v15)],
    products: products,
    dependencies: dependencies,
    targets: targets
)
