import CurlewEngine

extension URLRedaction {
    /// This redaction with the values of `providerParameters` (lower-case) replaced too: how the route layer names
    /// the URLs of a provider's calls, in its errors (``URLRedaction/messages``) and its log lines, with the names
    /// of the provider's ``HTTPProvider/additionalParameters`` (``HTTPProvider/credentialParameterNames``).
    package func redactingAlso(_ providerParameters: Set<String>) -> URLRedaction {
        guard !providerParameters.isSubset(of: queryParameters) else { return self }
        var redaction = self
        redaction.queryParameters.formUnion(providerParameters)
        return redaction
    }
}

extension HTTPProvider {
    /// The names of ``additionalParameters``, lower-case as ``URLRedaction`` compares them. They only go to the
    /// provider's origins, as credentials do (API keys live there: `appid`, `api-key`, `client_id`), so whatever
    /// the layer logs or tells of a call redacts their values; a route's own parameters stay visible.
    var credentialParameterNames: Set<String> {
        let parameters = additionalParameters
        // Most providers add none: no set to build on every call.
        guard !parameters.isEmpty else { return [] }
        return Set(parameters.keys.map { $0.lowercased() })
    }
}
