/// A JSON value: what route parameters are made of, and what ``RouteResponse/json()`` returns.
///
/// Literals build it directly, and subscripts read it without casts, so code that used SwiftyJSON or
/// `[String: Any]` keeps its shape:
/// ```swift
/// let json = try response.json()
/// for result in json["results"].arrayValue {
///     let id = result["id"].stringValue
/// }
/// ```
///
/// An enum, unlike Curlew's types that may grow (see the README's "API stability"): its cases are JSON's own kinds
/// of value (RFC 8259), with numbers split into integers and the rest, and JSON will not gain another.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A whole number that fits in an `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array, in order.
    case array([JSONValue])
    /// An object; member names are unique, their order is not kept.
    case object([String: JSONValue])
}

extension JSONValue {
    /// The member named `key` of an object, or ``null`` for anything else (as SwiftyJSON does).
    public subscript(key: String) -> JSONValue {
        if case .object(let members) = self { return members[key] ?? .null }
        return .null
    }

    /// The element at `index` of an array, or ``null`` when out of range or not an array.
    public subscript(index: Int) -> JSONValue {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return .null
    }

    /// The string, or the number or boolean written as one; `nil` for null, arrays and objects.
    public var string: String? {
        switch self {
        case .string(let value): value
        case .int(let value): String(value)
        case .double(let value): String(value)
        case .bool(let value): String(value)
        case .null, .array, .object: nil
        }
    }

    /// ``string``, or `""`.
    public var stringValue: String { string ?? "" }

    /// The integer (a double only when it has no fraction, a string only when it parses).
    public var int: Int? {
        switch self {
        case .int(let value): value
        case .double(let value): Int(exactly: value)
        case .string(let value): Int(value)
        default: nil
        }
    }

    /// ``int``, or `0`.
    public var intValue: Int { int ?? 0 }

    /// The number as a double.
    public var double: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        case .string(let value): Double(value)
        default: nil
        }
    }

    /// The boolean.
    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements of an array, `nil` for anything else.
    public var array: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// ``array``, or `[]`.
    public var arrayValue: [JSONValue] { array ?? [] }

    /// The members of an object, `nil` for anything else.
    public var object: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// Whether the value is JSON `null` (also what a missing member reads as).
    public var isNull: Bool { self == .null }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// A value that can stand in route parameters: strings, numbers, booleans, optionals, arrays and
/// string-keyed dictionaries of them, and ``JSONValue`` itself.
///
/// It lets parameters be written with variables, as in Nikka:
/// `params: ["email": email, "password": password, "remember": true]`.
public protocol ParameterConvertible: Sendable {
    /// The value as JSON, which every encoding starts from.
    var parameterValue: JSONValue { get }
}

/// Route parameters as written by users: any ``ParameterConvertible`` values by name.
public typealias Parameters = [String: any ParameterConvertible]

extension JSONValue: ParameterConvertible {
    public var parameterValue: JSONValue { self }
}

extension String: ParameterConvertible {
    public var parameterValue: JSONValue { .string(self) }
}

extension Substring: ParameterConvertible {
    public var parameterValue: JSONValue { .string(String(self)) }
}

extension Bool: ParameterConvertible {
    public var parameterValue: JSONValue { .bool(self) }
}

extension Int: ParameterConvertible {
    public var parameterValue: JSONValue { .int(self) }
}

extension Int64: ParameterConvertible {
    public var parameterValue: JSONValue { Int(exactly: self).map(JSONValue.int) ?? .string(String(self)) }
}

extension Double: ParameterConvertible {
    public var parameterValue: JSONValue { .double(self) }
}

extension Optional: ParameterConvertible where Wrapped: ParameterConvertible {
    public var parameterValue: JSONValue { self?.parameterValue ?? .null }
}

extension Array: ParameterConvertible where Element: ParameterConvertible {
    public var parameterValue: JSONValue { .array(map(\.parameterValue)) }
}

/// Nested objects are dictionaries of existential values, so a literal that mixes value types
/// (`["user": ["name": name, "age": 36]]`) compiles as written; a dictionary of one concrete type goes in as
/// `JSONValue` or through ``parameterValue`` (`["user": user.parameterValue]` for a `[String: String]`).
extension Dictionary: ParameterConvertible where Key == String, Value == any ParameterConvertible {
    public var parameterValue: JSONValue { .object(mapValues(\.parameterValue)) }
}

extension Dictionary where Key == String, Value: ParameterConvertible {
    /// The dictionary as a JSON object, for use as a route parameter.
    public var parameterValue: JSONValue { .object(mapValues(\.parameterValue)) }
}

extension JSONValue {
    /// Parameters as one JSON object.
    static func object(from parameters: Parameters) -> JSONValue {
        .object(parameters.mapValues(\.parameterValue))
    }
}
