import Testing

@testable import curlew

@Suite struct TerminalTextTests {
    @Test(arguments: [
        ("plain text, é, 日本, 🙂", "plain text, é, 日本, 🙂"),
        ("lines\nand\ttabs stay", "lines\nand\ttabs stay"),
        ("\u{1B}[31mred", "\\x1b[31mred"),
        ("bell\u{07} nul\u{0} cr\r del\u{7F}", "bell\\x07 nul\\x00 cr\\x0d del\\x7f"),
        // C1: U+009B is CSI to a terminal that reads C1 controls; U+00A0 (no-break space) is text.
        ("\u{9B}2J\u{85}\u{A0}", "\\x9b2J\\x85\u{A0}"),
        // A combining mark after the escape still leaves no escape behind.
        ("\u{1B}\u{301}[2K", "\\x1b\u{301}[2K"),
    ])
    func controlCharactersAreShownNotSent(text: String, shown: String) {
        #expect(TerminalText.printable(text) == shown)
    }
}
