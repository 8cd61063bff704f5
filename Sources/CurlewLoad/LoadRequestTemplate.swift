public import CurlewEngine
import Foundation
public import HTTPTypes

/// Which data rows the requests of a templated run use.
///
/// A struct with static members rather than an enum, so that modes can be added without breaking a `switch`.
public struct LoadDataRows: Sendable, Equatable {
    package let usesEachRowOnce: Bool

    /// Each row once, in order: request k uses row k, and the run ends when the rows run out.
    public static let once = LoadDataRows(usesEachRowOnce: true)
    /// The rows over and over: request k uses row k modulo the number of rows.
    public static let cycle = LoadDataRows(usesEachRowOnce: false)
}

/// A request whose URL, header values and body hold placeholders, filled anew for each request of a run.
///
/// Placeholders: `{{column}}` (a column of ``LoadData``, from the request's row), `{{seq}}` (the request's number
/// in the whole run: 0, 1, 2 …, unique across workers and shards), `{{uuid}}` (a random UUID) and
/// `{{randInt MIN MAX}}` (an integer from MIN to MAX inclusive). In the URL a column's value is percent-encoded
/// (all but the unreserved characters `A-Z a-z 0-9 - . _ ~`), so a value fills one path segment or query value;
/// in header values and the body it is inserted as it is.
///
/// Every placeholder, and every row's request, is checked when the template is made: a run never starts with a
/// template it cannot fill. A placeholder that names both a data column and a generator (a column named `seq` used
/// as `{{seq}}`) is refused as ambiguous: the column needs another name.
///
/// Request k uses row k of the data (shuffled by a seed if one is given), so each request's row depends on its
/// number alone: in a sharded run shard i of n sends requests i, i+n, … and therefore rows i, i+n, ….
public struct LoadRequestTemplate: Sendable {
    /// A template that cannot be filled: a malformed or unknown placeholder, or a row whose request is invalid.
    public struct ParseError: Error, CustomStringConvertible, Sendable, Equatable {
        /// What is wrong, and where.
        public let description: String
    }

    enum Piece: Sendable, Equatable {
        case literal(String)
        case column(Int)
        case sequence
        case uuid
        case randomInteger(ClosedRange<Int64>)
    }

    /// A text with placeholders, split up front so filling it is a walk over its pieces.
    struct Text: Sendable, Equatable {
        var pieces: [Piece]
        var isConstant: Bool { pieces.allSatisfy { if case .literal = $0 { true } else { false } } }
    }

    /// The request method.
    public let method: HTTPRequest.Method
    let url: Text
    let headers: [(name: String, value: Text)]
    let body: Text?
    /// The rows of `{{column}}` placeholders, in the data's order.
    package let rows: [[String?]]
    /// Request k uses row `order[k % rows.count]` (a seeded shuffle), or row `k % rows.count` without a seed.
    private let order: [Int]?
    private let columns: [String]
    /// Whether the run uses each row once or cycles through them.
    public let rowMode: LoadDataRows
    private let seed: UInt64?
    /// Timeouts of every request.
    public var timeouts = CurlewRequest.TimeoutOverrides()
    /// The largest response body read (checks on bodies set it).
    package var maxResponseBodySize: Int?
    /// Whether a request's URL, once every row's was validated, needs no parsing: see ``urlNeedsNoParsing(_:)``.
    package let fillsWithoutParsing: Bool

    /// The number of requests the data allows with ``LoadDataRows/once``, nil when rows are cycled or there are
    /// none.
    public var rowLimit: Int? { rowMode.usesEachRowOnce && !rows.isEmpty ? rows.count : nil }

    /// A template of `method url`, `headers` (name, value) and `body`, filled from `data`.
    ///
    /// - Parameters:
    ///   - seed: shuffles the rows (the same seed, the same order); nil keeps the data's order. It also makes
    ///     `{{randInt}}` reproducible (each request's number depends on the seed and the request number).
    /// - Throws: ``ParseError`` for an unclosed or empty `{{`, a placeholder that is neither a column of `data`
    ///   nor a generator, or both (a column named `seq` or `uuid` in `{{seq}}` or `{{uuid}}`), a `randInt` whose
    ///   bounds are not two integers MIN ≤ MAX, `{{column}}` without data or without rows, `once` without rows, or
    ///   a row whose request is invalid (a bad URL, a header value with a line break, a missing JSON key).
    public init(
        method: HTTPRequest.Method = .get, url: String, headers: [(String, String)] = [], body: String? = nil,
        data: LoadData? = nil, rows rowMode: LoadDataRows = .cycle, seed: UInt64? = nil
    ) throws(ParseError) {
        let columns = data?.columns ?? []
        self.method = method
        self.url = try Self.parse(url, in: "the URL", columns: columns)
        var parsedHeaders: [(name: String, value: Text)] = []
        for (name, value) in headers {
            parsedHeaders.append((name, try Self.parse(value, in: "header \(name)", columns: columns)))
        }
        self.headers = parsedHeaders
        self.body = try body.map { text throws(ParseError) in try Self.parse(text, in: "the body", columns: columns) }
        self.rowMode = rowMode
        self.seed = seed
        let rows = data?.rows ?? []
        self.rows = rows
        self.columns = columns
        self.order = seed.map { Self.shuffledIndices(count: rows.count, seed: $0) }
        self.fillsWithoutParsing = Self.urlNeedsNoParsing(self.url)
        let usesColumns = ([self.url] + parsedHeaders.map(\.value) + (self.body.map { [$0] } ?? [])).contains {
            $0.pieces.contains { if case .column = $0 { true } else { false } }
        }
        if usesColumns && rows.isEmpty { throw ParseError(description: "the data has no rows to fill the template") }
        if rowMode.usesEachRowOnce && rows.isEmpty {
            throw ParseError(description: "each row once needs data with at least one row")
        }
        // Every row is filled once up front, so a bad row stops the run before anything is sent.
        for index in 0..<max(rows.count, 1) {
            do {
                _ = try makeRequest(ticket: index, parsingURL: true)
            } catch {
                let which = rows.isEmpty ? "" : "data row \(rowIndex(ticket: index) + 1): "
                throw ParseError(description: "\(which)\(error.detail)")
            }
        }
    }

    /// Whether `text` holds a placeholder (`{{`): a command sends it as a template only then.
    public static func hasPlaceholders(_ text: String) -> Bool { text.contains("{{") }

    /// The most data rows whose requests are made up front (about 1 KiB each): 64 Ki rows, 64 MiB at most.
    package static let rowsMadeUpFront = 1 << 16

    /// Every request of the run, made once, when they repeat: no generator (`{{seq}}`, `{{uuid}}`, `{{randInt}}`)
    /// and at most ``rowsMadeUpFront`` rows. Request k of the run is element `k % count`, as ``request(ticket:)``
    /// makes it. Nil when requests must be made one by one.
    package func requestsMadeUpFront() -> [CurlewRequest]? {
        let texts = [url] + headers.map(\.value) + (body.map { [$0] } ?? [])
        let generates = texts.contains { text in
            text.pieces.contains {
                switch $0 {
                case .literal, .column: false
                case .sequence, .uuid, .randomInteger: true
                }
            }
        }
        guard !generates, rows.count <= Self.rowsMadeUpFront else { return nil }
        var made: [CurlewRequest] = []
        made.reserveCapacity(max(rows.count, 1))
        for ticket in 0..<max(rows.count, 1) {
            // Every row was filled when the template was made: none fails here.
            guard case .success(let request) = request(ticket: ticket) else { return nil }
            made.append(request)
        }
        return made
    }

    /// Request `ticket` of the whole run, or nil when the rows have run out (``LoadDataRows/once``).
    package func request(ticket: Int) -> Result<CurlewRequest, CurlewError>? {
        if rowMode.usesEachRowOnce && ticket >= rows.count { return nil }
        do {
            return .success(try makeRequest(ticket: ticket, parsingURL: !fillsWithoutParsing))
        } catch {
            return .failure(error)
        }
    }

    /// Whether every URL the template makes has the scheme and host of one validated up front, and nothing a
    /// parser could read otherwise, so a filled URL needs only the cheap checks (`CurlewRequest(filledURL:)`):
    ///
    /// - it starts with a literal `http://` or `https://` (never a socket's `http+unix://`);
    /// - generators (`{{seq}}`, `{{uuid}}`, `{{randInt}}`: digits, hex letters and `-` only) come after a literal
    ///   `/`, `?` or `#` that ends the authority; columns may come anywhere, since every row's URL was validated
    ///   and a column's value fills the same request whatever the request number;
    /// - every `%` of a literal is a whole escape within it, so no generated character completes one.
    static func urlNeedsNoParsing(_ url: Text) -> Bool {
        guard case .literal(let head)? = url.pieces.first,
            ["http://", "https://"].contains(where: { head.lowercased().hasPrefix($0) })
        else { return false }
        var authorityEnded = false
        for (index, piece) in url.pieces.enumerated() {
            switch piece {
            case .literal(let text):
                let bytes = Array(text.utf8)
                for (position, byte) in bytes.enumerated() where byte == UInt8(ascii: "%") {
                    guard position + 2 < bytes.count, bytes[position + 1].isHexDigit, bytes[position + 2].isHexDigit
                    else { return false }
                }
                let afterScheme = index == 0 ? Array(bytes.drop { $0 != UInt8(ascii: ":") }.dropFirst(3)) : bytes
                if afterScheme.contains(where: {
                    $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
                }) {
                    authorityEnded = true
                }
            case .column: break
            case .sequence, .uuid, .randomInteger:
                if !authorityEnded { return false }
            }
        }
        return true
    }

    private func makeRequest(ticket: Int, parsingURL: Bool) throws(CurlewError) -> CurlewRequest {
        let row: [String?] = rows.isEmpty ? [] : rows[rowIndex(ticket: ticket)]
        var request: CurlewRequest
        do {
            let filled = try fill(url, row: row, ticket: ticket, encoded: true)
            request =
                parsingURL
                ? try CurlewRequest(method: method, url: filled) : try CurlewRequest(method: method, filledURL: filled)
            for (name, value) in headers {
                try request.addHeader(name, try fill(value, row: row, ticket: ticket, encoded: false))
            }
        } catch let error as CurlewError {
            throw error
        } catch {
            throw CurlewError(code: .invalidRequest, detail: "\(error)")
        }
        if let body { request.body = .bytes(Array(try fill(body, row: row, ticket: ticket, encoded: false).utf8)) }
        request.timeouts = timeouts
        request.maxResponseBodySize = maxResponseBodySize
        return request
    }

    private func rowIndex(ticket: Int) -> Int {
        let position = ticket % rows.count
        return order?[position] ?? position
    }

    private func fill(_ text: Text, row: [String?], ticket: Int, encoded: Bool) throws(CurlewError) -> String {
        var result = ""
        for (index, piece) in text.pieces.enumerated() {
            switch piece {
            case .literal(let literal): result += literal
            case .column(let column):
                guard let value = row[column] else {
                    throw CurlewError(code: .invalidRequest, detail: "no value for {{\(columns[column])}}")
                }
                result += encoded ? PercentEncoding.encodeComponent(value) : value
            case .sequence: result += String(ticket)
            case .uuid: result += UUID().uuidString.lowercased()
            case .randomInteger(let range):
                let span = UInt64(bitPattern: range.upperBound &- range.lowerBound) &+ 1
                let random: UInt64 =
                    if let seed {
                        splitMix(seed &+ UInt64(truncatingIfNeeded: ticket) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index))
                    } else {
                        UInt64.random(in: .min ... .max)
                    }
                let offset = span == 0 ? random : random % span
                result += String(range.lowerBound &+ Int64(bitPattern: offset))
            }
        }
        return result
    }

    static func parse(_ text: String, in place: String, columns: [String]) throws(ParseError) -> Text {
        var pieces: [Piece] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            if open.lowerBound > rest.startIndex { pieces.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].range(of: "}}") else {
                throw ParseError(description: "\(place): a placeholder opened with {{ is never closed with }}")
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            pieces.append(try placeholder(name, in: place, columns: columns))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { pieces.append(.literal(String(rest))) }
        return Text(pieces: pieces)
    }

    private static func placeholder(_ name: String, in place: String, columns: [String]) throws(ParseError) -> Piece {
        let words = name.split(separator: " ", omittingEmptySubsequences: true)
        // A data column named like a generator lost to it without a word: the requests carried random UUIDs or
        // request numbers instead of the rows' values. Neither reading is safe to guess.
        if let generator = words.first, ["seq", "uuid", "randInt"].contains(generator), columns.contains(name) {
            throw ParseError(
                description:
                    "\(place): {{\(name)}} is ambiguous: it names a data column and the generator \(generator); rename the column"
            )
        }
        switch words.first {
        case nil: throw ParseError(description: "\(place): an empty placeholder {{}}")
        case "seq" where words.count == 1: return .sequence
        case "uuid" where words.count == 1: return .uuid
        case "randInt":
            guard words.count == 3, let low = Int64(words[1]), let high = Int64(words[2]), low <= high else {
                throw ParseError(
                    description: "\(place): {{\(name)}} must be {{randInt MIN MAX}} with integers MIN <= MAX")
            }
            return .randomInteger(low...high)
        default:
            if let column = columns.firstIndex(of: name) { return .column(column) }
            let known = columns.isEmpty ? "no data columns" : "data columns: " + columns.joined(separator: ", ")
            throw ParseError(
                description:
                    "\(place): unknown placeholder {{\(name)}} (\(known); generators: seq, uuid, randInt MIN MAX)")
        }
    }

    /// Fisher–Yates with SplitMix64: the same seed gives the same order on every shard.
    private static func shuffledIndices(count: Int, seed: UInt64) -> [Int] {
        var indices = Array(0..<count)
        var state = seed
        for index in stride(from: count - 1, to: 0, by: -1) {
            state &+= 0x9E37_79B9_7F4A_7C15
            indices.swapAt(index, Int(splitMix(state) % UInt64(index + 1)))
        }
        return indices
    }
}

/// SplitMix64's output function: a well-mixed 64-bit value of `value`.
private func splitMix(_ value: UInt64) -> UInt64 {
    var z = value
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
