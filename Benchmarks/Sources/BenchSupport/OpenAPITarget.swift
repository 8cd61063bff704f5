// S9's clients call a ClientTransport with a server URL and a path, as generated clients do.
import Foundation

/// `http://host:port/small` as the OpenAPI transports take it: the server URL and the path.
public func splitURL(_ url: String) -> (base: URL, path: String)? {
    guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host
    else { return nil }
    let port = components.port.map { ":\($0)" } ?? ""
    guard let base = URL(string: "\(scheme)://\(host)\(port)") else { return nil }
    let query = components.percentEncodedQuery.map { "?\($0)" } ?? ""
    let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    return (base, path + query)
}
