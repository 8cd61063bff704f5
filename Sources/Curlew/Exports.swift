// `import Curlew` is all a route-layer user writes: the engine's types that routes and providers take and
// return (`CurlewRequest`, `MultipartForm`, `CurlewError`, `TransferProgress`, ...) and swift-http-types'
// (`HTTPRequest.Method`, `HTTPField.Name`, `HTTPFields`) are re-exported rather than wrapped in typealiases, so
// each has one name and code written against the engine or http-types moves over unchanged (Hummingbird
// re-exports HTTPTypes the same way). Decision: docs/design/0012-service-integrations.md.
@_exported public import CurlewEngine
@_exported public import HTTPTypes
