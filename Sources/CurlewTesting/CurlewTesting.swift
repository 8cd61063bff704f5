// Test support for users of the route layer: mock transport and fixtures (issue 4).
