public import CurlewEngine
import Foundation

/// A body a route sends as it is, instead of encoded parameters.
///
/// Every kind but a stream is replayable, so a retry or a 307/308 redirect can send it again.
public struct RouteBody: Sendable {
    enum Storage: Sendable {
        case bytes([UInt8])
        case encodable(@Sendable (JSONEncoder) throws -> [UInt8])
        case file(String)
        case multipart(MultipartForm)
        case stream(RequestBodyStream)
    }

    let storage: Storage
    /// The `Content-Type` sent with it, unless the route's or provider's headers set one.
    public let contentType: String?

    /// Bytes in memory.
    public static func bytes(_ bytes: [UInt8], contentType: String? = "application/octet-stream") -> RouteBody {
        RouteBody(storage: .bytes(bytes), contentType: contentType)
    }

    /// Text, sent as UTF-8.
    public static func string(_ text: String, contentType: String? = "text/plain; charset=utf-8") -> RouteBody {
        RouteBody(storage: .bytes(Array(text.utf8)), contentType: contentType)
    }

    /// An `Encodable` value as JSON, encoded with the provider's ``HTTPProvider/jsonEncoder`` when the request
    /// is built.
    public static func json(_ value: some Encodable & Sendable) -> RouteBody {
        RouteBody(storage: .encodable({ encoder in Array(try encoder.encode(value)) }), contentType: "application/json")
    }

    /// A file's bytes, read as they are sent, in constant memory.
    public static func file(_ path: String, contentType: String? = "application/octet-stream") -> RouteBody {
        RouteBody(storage: .file(path), contentType: contentType)
    }

    /// A `multipart/form-data` form, the engine's own ``CurlewEngine/MultipartForm``, encoded part by part as it
    /// is sent (files in constant memory, exact `Content-Length` when every size is known).
    public static func multipart(_ form: MultipartForm) -> RouteBody {
        RouteBody(storage: .multipart(form), contentType: form.contentType)
    }

    /// Bytes produced while they are sent, with backpressure. One-shot: a request with a stream body is never
    /// retried, whoever asks.
    public static func stream(
        _ stream: RequestBodyStream, contentType: String? = "application/octet-stream"
    ) -> RouteBody {
        RouteBody(storage: .stream(stream), contentType: contentType)
    }

    /// Whether the body can be sent more than once, which retries need: everything but a stream, and a form
    /// without stream parts.
    public var isReplayable: Bool {
        switch storage {
        case .bytes, .encodable, .file: true
        case .multipart(let form): form.isReplayable
        case .stream: false
        }
    }
}
