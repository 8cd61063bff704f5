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
        .executable(name: "curlew", targets: ["curlew"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
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
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CurlewLoopbackServer",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "curlew",
            dependencies: ["CurlewEngine", "CurlewLoopbackServer"],
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
                "CLibCurl",
                "CurlewTestSupport",
                "CurlewLoopbackServer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
