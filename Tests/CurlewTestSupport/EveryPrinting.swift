/// What each way Swift turns a value into text shows: interpolation, `String(describing:)`,
/// `String(reflecting:)` and `dump` (the last one walks the value's mirror), named for failure messages.
public func everyPrinting(of value: Any) -> [(way: String, text: String)] {
    var dumped = ""
    dump(value, to: &dumped)
    return [
        ("interpolation", "\(value)"),
        ("String(describing:)", String(describing: value)),
        ("String(reflecting:)", String(reflecting: value)),
        ("dump", dumped),
    ]
}
