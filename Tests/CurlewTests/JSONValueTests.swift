import Curlew
import Foundation
import Testing

@Suite struct JSONValueTests {
    @Test func codableRoundTripKeepsEveryKind() throws {
        let value: JSONValue = [
            "s": "Zoë", "i": 42, "d": 0.5, "b": false, "n": nil, "a": [1, "x"], "o": ["k": [true]],
        ]
        let decoded = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
        #expect(decoded == value)
    }

    @Test func readersConvertOnlyWhereItIsLossless() {
        let value: JSONValue = ["n": 3.0, "f": 3.5, "s": "12", "t": "x"]
        #expect(value["n"].int == 3)
        #expect(value["f"].int == nil)
        #expect(value["s"].int == 12)
        #expect(value["t"].int == nil)
        #expect(value["t"].intValue == 0)
        #expect(value[0].isNull)
        #expect(value["missing"].stringValue == "")
    }

    @Test func parametersAcceptVariablesOfEveryConvertibleType() {
        let email = "a@b.c"
        let count = 3
        let tags = ["x", "y"]
        let nickname: String? = nil
        let parameters: Parameters = ["email": email, "count": count, "tags": tags, "nickname": nickname, "on": true]
        let route = Route(path: "/p", params: parameters)
        #expect(route.parameters == ["email": "a@b.c", "count": 3, "tags": ["x", "y"], "nickname": nil, "on": true])
    }
}
