import Testing

@Suite struct RouteLayerPlaceholderTests {
    @Test func placeholder() { #expect(Bool(true)) }
}
