import CLibCurl

/// The sockets libcurl opened for a transfer's current request, oldest first, so the pre-request callback can tell
/// which one became the connection. With happy eyeballs and addresses that fail, libcurl opens several, and the
/// winner need not be one of the last two (a first family's socket can connect after the second family's and a
/// retry within a family opened).
struct OpenedSockets {
    private(set) var sockets: [Int32] = []

    /// libcurl opened `socket` for the current request.
    mutating func opened(_ socket: Int32) {
        sockets.append(socket)
    }

    /// The current request has its connection: later sockets belong to a later request (a redirect, a retry).
    mutating func forget() {
        // Emptying an empty array is a call; most requests open no socket.
        if !sockets.isEmpty { sockets.removeAll(keepingCapacity: true) }
    }

    /// The newest socket bound to `localPort`, as `localPortOf` reads a socket's local port (nil when none is). A
    /// descriptor libcurl closed and reused for a later socket is read as that later socket, which is the one it is.
    func newest(boundTo localPort: Int32, localPortOf: (Int32) -> Int32 = curlew_socket_local_port) -> Int32? {
        sockets.last { localPortOf($0) == localPort }
    }
}
