import CurlewEngine

/// How a route's parameters travel, as in Nikka.
///
/// When a route names none, the provider's ``HTTPProvider/defaultEncoding(for:)`` picks ``json`` for POST, PUT
/// and PATCH and ``url`` for every other method, so a GET never carries a body.
///
/// A struct rather than an enum, so that encodings can be added without breaking a caller's `switch`; ``name`` is
/// stable.
public struct ParameterEncoding: Sendable, Hashable, CustomStringConvertible {
    /// The request builder's exhaustive view of the encoding.
    enum Storage: Sendable, Hashable {
        case json
        case form
        case url
    }

    let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// A JSON object in the body, `Content-Type: application/json`. Refused for GET and HEAD, which have no body.
    public static let json = ParameterEncoding(.json)
    /// `application/x-www-form-urlencoded` in the body.
    public static let form = ParameterEncoding(.form)
    /// Appended to the URL's query.
    public static let url = ParameterEncoding(.url)

    /// The stable name: the static member's name (`"json"`, `"form"`, `"url"`).
    public var name: String {
        switch storage {
        case .json: "json"
        case .form: "form"
        case .url: "url"
        }
    }

    public var description: String { name }
}

/// How arrays and nested objects become query or form pairs; the same rules for ``ParameterEncoding/url``
/// and ``ParameterEncoding/form``.
///
/// - `["ids": [1, 2]]` becomes `ids[]=1&ids[]=2` with ``brackets`` (Rails, PHP, Alamofire's default),
///   `ids=1&ids=2` with ``repeatedKey`` (Go, Python, httpbin).
/// - `["user": ["name": "a"]]` becomes `user[name]=a` in both.
/// - `true` and `false` are written as words, `null` as an empty value.
/// - Keys are sorted, so the same parameters always give the same string (and the same cache key).
/// - Everything outside RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`) is percent-encoded as
///   UTF-8, in keys and values: `&`, `=`, `+`, `#`, `/`, `?` and spaces (`%20`) included.
///
/// A struct rather than an enum, so that styles (indices in brackets, comma-separated values) can be added
/// without breaking a caller's `switch`; ``name`` is stable.
public struct ArrayEncoding: Sendable, Hashable, CustomStringConvertible {
    /// The encoder's exhaustive view of the style.
    enum Storage: Sendable, Hashable {
        case brackets
        case repeatedKey
    }

    let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// `ids[]=1&ids[]=2`: Rails, PHP and Alamofire's default, and the provider's.
    public static let brackets = ArrayEncoding(.brackets)
    /// `ids=1&ids=2`: Go, Python and httpbin.
    public static let repeatedKey = ArrayEncoding(.repeatedKey)

    /// The stable name: the static member's name (`"brackets"`, `"repeatedKey"`).
    public var name: String {
        switch storage {
        case .brackets: "brackets"
        case .repeatedKey: "repeatedKey"
        }
    }

    public var description: String { name }
}

enum QueryEncoder {
    static func encode(_ parameters: [String: JSONValue], arrays: ArrayEncoding) -> String {
        var pairs: [(String, String)] = []
        for key in parameters.keys.sorted() {
            appendPairs(key: key, value: parameters[key]!, arrays: arrays, to: &pairs)
        }
        var query = ""
        for (index, pair) in pairs.enumerated() {
            if index > 0 { query += "&" }
            query += PercentEncoding.encodeComponent(pair.0)
            query += "="
            query += PercentEncoding.encodeComponent(pair.1)
        }
        return query
    }

    private static func appendPairs(
        key: String, value: JSONValue, arrays: ArrayEncoding, to pairs: inout [(String, String)]
    ) {
        switch value {
        case .array(let elements):
            let elementKey =
                switch arrays.storage {
                case .brackets: key + "[]"
                case .repeatedKey: key
                }
            for element in elements {
                appendPairs(key: elementKey, value: element, arrays: arrays, to: &pairs)
            }
        case .object(let members):
            for memberKey in members.keys.sorted() {
                appendPairs(key: "\(key)[\(memberKey)]", value: members[memberKey]!, arrays: arrays, to: &pairs)
            }
        case .null:
            pairs.append((key, ""))
        default:
            pairs.append((key, value.stringValue))
        }
    }
}
