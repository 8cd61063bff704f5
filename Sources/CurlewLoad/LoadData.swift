import Foundation

/// Rows of values that fill a request template's `{{column}}` placeholders: a CSV file with a header row, or JSON
/// lines (one object per line).
public struct LoadData: Sendable, Equatable {
    /// A data file that could not be read; the message names the line.
    public struct ParseError: Error, CustomStringConvertible, Sendable, Equatable {
        /// What is wrong, and where.
        public let description: String
    }

    /// The column names: a CSV file's header row, or every key of the JSON lines, sorted.
    public let columns: [String]
    /// One value per column for each row; nil where a JSON line lacks the key.
    public let rows: [[String?]]

    /// Rows from an RFC 4180 CSV text: the first record names the columns; fields may be quoted (`"a, ""b"""`),
    /// and a quoted field may hold commas, quotes and line breaks. Lines end in CRLF or LF. A leading byte order mark
    /// is skipped.
    ///
    /// - Throws: ``ParseError`` for a text without a header, duplicate or empty column names, a record with another
    ///   number of fields than the header, an unterminated quote, or a quote inside an unquoted field.
    public static func csv(_ text: String) throws(ParseError) -> LoadData {
        let records = try CSVReader.records(of: text.droppingByteOrderMark)
        guard let header = records.first else { throw ParseError(description: "the CSV has no header row") }
        try checkColumns(header)
        var rows: [[String?]] = []
        rows.reserveCapacity(records.count - 1)
        for (index, record) in records.enumerated().dropFirst() {
            guard record.fields.count == header.fields.count else {
                throw ParseError(
                    description:
                        "CSV record \(index + 1) (line \(record.line)) has \(record.fields.count) fields, the header \(header.fields.count)"
                )
            }
            rows.append(record.fields.map { $0 })
        }
        return LoadData(columns: header.fields, rows: rows)
    }

    /// Rows from JSON lines: each non-empty line one object whose strings, numbers and booleans fill the columns
    /// of their keys. Lines end in LF or CRLF. A leading byte order mark is skipped.
    ///
    /// - Throws: ``ParseError`` for a line that is not a JSON object, or a value that is an array, object or null.
    public static func jsonLines(_ text: String) throws(ParseError) -> LoadData {
        var objects: [[String: String]] = []
        var keys = Set<String>()
        // Split at each LF byte, never at the Character "\n": CRLF is one Character, so a file written on Windows
        // was one line and refused as not JSON.
        for (index, bytes) in text.droppingByteOrderMark.utf8.split(
            separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false
        ).enumerated() {
            let line = Substring(bytes.last == UInt8(ascii: "\r") ? bytes.dropLast() : bytes)
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty { continue }
            guard
                let object = try? JSONSerialization.jsonObject(with: Data(trimmed.utf8)) as? [String: Any]
            else { throw ParseError(description: "line \(index + 1) is not a JSON object") }
            var row: [String: String] = [:]
            for (key, value) in object {
                switch value {
                case let number as NSNumber where isBoolean(number):
                    row[key] = number.boolValue ? "true" : "false"
                case let number as NSNumber: row[key] = number.stringValue
                case let string as String: row[key] = string
                default:
                    throw ParseError(
                        description: "line \(index + 1): \(key.debugDescription) must be a string, number or boolean")
                }
                keys.insert(key)
            }
            objects.append(row)
        }
        let columns = keys.sorted()
        return LoadData(columns: columns, rows: objects.map { object in columns.map { object[$0] } })
    }

    /// Rows of `columns`, each with one value per column.
    public init(columns: [String], rows: [[String?]]) {
        self.columns = columns
        self.rows = rows
    }

    private static func checkColumns(_ header: CSVReader.Record) throws(ParseError) {
        var seen = Set<String>()
        for name in header.fields {
            guard !name.isEmpty else { throw ParseError(description: "the CSV header has an empty column name") }
            guard seen.insert(name).inserted else {
                throw ParseError(description: "the CSV header names \(name.debugDescription) twice")
            }
        }
    }
}

extension String {
    /// The text without one leading U+FEFF: the byte order mark Excel's "CSV UTF-8" and Windows editors write
    /// before UTF-8 text. Kept, it was part of a CSV file's first column name, and a targets file was neither
    /// JSON (its first line did not start with `{`) nor plain (`METHOD` was not all letters).
    var droppingByteOrderMark: Substring {
        unicodeScalars.first == "\u{FEFF}" ? Substring(unicodeScalars.dropFirst()) : self[...]
    }
}

/// Whether a JSON number is a boolean: `JSONSerialization` returns both as `NSNumber`, told apart by type encoding.
private func isBoolean(_ number: NSNumber) -> Bool {
    let encoding = String(cString: number.objCType)
    return encoding == "c" || encoding == "B"
}

/// A small RFC 4180 reader: records of fields, quoted fields with doubled quotes, CRLF or LF line ends.
enum CSVReader {
    struct Record {
        var fields: [String]
        /// The line the record starts on, 1-based.
        var line: Int
    }

    static func records(of text: Substring) throws(LoadData.ParseError) -> [Record] {
        var records: [Record] = []
        var fields: [String] = []
        var field = ""
        var inQuotes = false
        var fieldWasQuoted = false
        var line = 1
        var recordLine = 1
        var characters = text.unicodeScalars.makeIterator()
        var pending: Unicode.Scalar? = characters.next()
        func endRecord() {
            fields.append(field)
            // A blank line is no record (a trailing newline, or blank lines between records).
            if !(fields.count == 1 && field.isEmpty && !fieldWasQuoted) {
                records.append(Record(fields: fields, line: recordLine))
            }
            fields = []
            field = ""
            fieldWasQuoted = false
        }
        while let scalar = pending {
            pending = characters.next()
            if inQuotes {
                if scalar == "\"" {
                    if pending == "\"" {
                        field.unicodeScalars.append("\"")
                        pending = characters.next()
                    } else {
                        inQuotes = false
                    }
                } else {
                    if scalar == "\n" { line += 1 }
                    field.unicodeScalars.append(scalar)
                }
                continue
            }
            switch scalar {
            case ",":
                fields.append(field)
                field = ""
                fieldWasQuoted = false
            case "\r" where pending == "\n":
                continue
            case "\n":
                endRecord()
                line += 1
                recordLine = line
            case "\"":
                guard field.isEmpty && !fieldWasQuoted else {
                    throw LoadData.ParseError(description: "line \(line): a quote inside an unquoted field")
                }
                inQuotes = true
                fieldWasQuoted = true
            default:
                if fieldWasQuoted {
                    throw LoadData.ParseError(description: "line \(line): text after a closing quote")
                }
                field.unicodeScalars.append(scalar)
            }
        }
        if inQuotes { throw LoadData.ParseError(description: "line \(recordLine): a quoted field is never closed") }
        if !field.isEmpty || !fields.isEmpty || fieldWasQuoted { endRecord() }
        return records
    }
}
