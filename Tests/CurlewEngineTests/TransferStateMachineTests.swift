import Testing
@testable import CurlewEngine
