import CurlewLoad
import Testing

/// `--data` files: RFC 4180 CSV with a header row, and JSON lines.
struct LoadDataTests {
    @Test func csvHeaderNamesTheColumnsAndQuotedFieldsKeepCommasQuotesAndLineBreaks() throws {
        let data = try LoadData.csv(
            "id,name,note\r\n1,Ann,plain\r\n2,\"Smith, Bob\",\"say \"\"hi\"\"\"\n3,Cy,\"two\nlines\"\n")
        #expect(data.columns == ["id", "name", "note"])
        #expect(data.rows == [["1", "Ann", "plain"], ["2", "Smith, Bob", "say \"hi\""], ["3", "Cy", "two\nlines"]])
    }

    @Test func csvWithoutTrailingNewlineAndWithEmptyFieldsReadsEveryRecord() throws {
        let data = try LoadData.csv("a,b\n,x\n\"\",")
        #expect(data.rows == [["", "x"], ["", ""]])
    }

    /// Excel's "CSV UTF-8" starts the file with a byte order mark, which stayed in the first column's name: a
    /// template's `{{id}}` was then an unknown placeholder. JSON lines skip it too.
    @Test func aLeadingByteOrderMarkIsNoPartOfTheFirstColumn() throws {
        let csv = try LoadData.csv("\u{FEFF}id\n1\n")
        #expect(csv.columns == ["id"])
        #expect(csv.rows == [["1"]])
        let jsonLines = try LoadData.jsonLines("\u{FEFF}{\"id\": 1}\n")
        #expect(jsonLines.columns == ["id"])
        #expect(jsonLines.rows == [["1"]])
    }

    @Test(arguments: [
        ("", "no header"), ("a,b\n1\n", "record 2 (line 2) has 1 fields"), ("a,a\n1,2\n", "names \"a\" twice"),
        ("a,\n1,2\n", "empty column name"), ("a\n\"open\n", "never closed"), ("a\nx\"y\n", "quote inside"),
        ("a\n\"x\"y\n", "after a closing quote"),
    ])
    func badCSVIsATypedErrorSayingWhere(_ text: String, _ expected: String) {
        #expect {
            _ = try LoadData.csv(text)
        } throws: { error in
            (error as? LoadData.ParseError)?.description.contains(expected) == true
        }
    }

    @Test func jsonLinesFillColumnsFromEveryKeyAndTurnNumbersAndBooleansIntoText() throws {
        let data = try LoadData.jsonLines("{\"id\": 1, \"name\": \"Ann\"}\n\n{\"id\": 2.5, \"ok\": true}\n")
        #expect(data.columns == ["id", "name", "ok"])
        #expect(data.rows == [["1", "Ann", nil], ["2.5", nil, "true"]])
    }

    /// Lines were split at the Character "\n", and CRLF is one Character: a file with Windows line ends was a single
    /// line, refused as not JSON. A CRLF line ends like an LF one; a bad line is still named by its number.
    @Test func jsonLinesWithCRLFLineEndsReadEveryLine() throws {
        let data = try LoadData.jsonLines("{\"id\":\"1\"}\r\n{\"id\":\"2\"}\r\n")
        #expect(data.columns == ["id"])
        #expect(data.rows == [["1"], ["2"]])
        #expect {
            _ = try LoadData.jsonLines("{\"a\": 1}\r\n\r\nnot json\r\n")
        } throws: { error in
            (error as? LoadData.ParseError)?.description.contains("line 3") == true
        }
    }

    @Test(arguments: ["[1]", "{\"a\": [1]}", "{\"a\": null}", "not json"])
    func badJSONLinesAreTypedErrorsNamingTheLine(_ line: String) {
        #expect {
            _ = try LoadData.jsonLines("{\"a\": 1}\n" + line)
        } throws: { error in
            (error as? LoadData.ParseError)?.description.contains("line 2") == true
        }
    }
}
