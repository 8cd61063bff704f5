import HTTPTypes

extension HTTPFields {
    /// The request's header fields as the lines libcurl sends (`Name: value`, or `Name;` for an empty value),
    /// in order; a function of its own so the fuzz target checks exactly what goes on the wire.
    ///
    /// - Parameter withholdingCredentials: leave out the fields `CredentialPolicy` withholds from other origins.
    func forEachRequestHeaderLine(withholdingCredentials: Bool, _ emit: (String) -> Void) {
        var cookies: [String] = []
        for field in self {
            if withholdingCredentials && CredentialPolicy.isCredential(field) { continue }
            if field.name == .cookie {
                // http-types keeps each cookie pair as a field of its own; HTTP/1.1 allows one Cookie line
                // (RFC 6265 §5.4), so they go out joined, in order.
                cookies.append(field.value)
                continue
            }
            // "Name:" would make libcurl drop the header; "Name;" is its syntax for an empty value.
            emit(field.value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(field.value)")
        }
        if !cookies.isEmpty { emit("Cookie: " + cookies.joined(separator: "; ")) }
    }
}
