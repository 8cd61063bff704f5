import Foundation

/// One sample of a Prometheus text exposition: the metric name, its labels and its value.
public struct ExpositionSample: Equatable, Sendable {
    public let name: String
    public let labels: [String: String]
    public let value: Double

    /// Parses the text exposition format (0.0.4): comment lines skipped, label values unescaped.
    public static func parse(_ text: String) throws -> [ExpositionSample] {
        var samples: [ExpositionSample] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.isEmpty {
            var labels: [String: String] = [:]
            let name: Substring
            var rest: Substring
            if let brace = line.firstIndex(of: "{") {
                name = line[..<brace]
                rest = line[line.index(after: brace)...]
                while !rest.hasPrefix("}") {
                    guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].hasPrefix("\"")
                    else { throw TestSupportError("bad labels in \(line)") }
                    let key = String(rest[..<equals])
                    var value = ""
                    var index = rest.index(equals, offsetBy: 2)
                    while rest[index] != "\"" {
                        if rest[index] == "\\" {
                            index = rest.index(after: index)
                            value.append(rest[index] == "n" ? "\n" : rest[index])
                        } else {
                            value.append(rest[index])
                        }
                        index = rest.index(after: index)
                    }
                    labels[key] = value
                    rest = rest[rest.index(after: index)...]
                    if rest.hasPrefix(",") { rest = rest.dropFirst() }
                }
                rest = rest.dropFirst()
            } else {
                guard let space = line.firstIndex(of: " ") else { throw TestSupportError("no value in \(line)") }
                name = line[..<space]
                rest = line[space...]
            }
            guard
                let value = Double(
                    rest.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "+Inf", with: "inf"))
            else { throw TestSupportError("bad value in \(line)") }
            samples.append(ExpositionSample(name: String(name), labels: labels, value: value))
        }
        return samples
    }
}

extension [ExpositionSample] {
    /// The value of the one sample named `name` whose labels include `labels`; nil when there is none.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }
        return matching.count == 1 ? matching[0].value : nil
    }
}
