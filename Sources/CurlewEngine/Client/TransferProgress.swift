/// How far a transfer has got, as reported to ``CurlewRequest/onProgress``.
public struct TransferProgress: Sendable, Hashable {
    /// Request body bytes sent so far (compressed bytes, for a compressed body).
    public var bytesSent: Int64
    /// The request body's size, when known up front.
    public var totalBytesToSend: Int64?
    /// Response body bytes received so far, as they came over the wire.
    public var bytesReceived: Int64
    /// The response body's announced size, when the server announced one.
    public var totalBytesToReceive: Int64?
    /// Whether this is the last report: the transfer has ended (successfully or not).
    public var isComplete: Bool

    /// Creates a progress value.
    public init(
        bytesSent: Int64, totalBytesToSend: Int64?, bytesReceived: Int64, totalBytesToReceive: Int64?,
        isComplete: Bool
    ) {
        self.bytesSent = bytesSent
        self.totalBytesToSend = totalBytesToSend
        self.bytesReceived = bytesReceived
        self.totalBytesToReceive = totalBytesToReceive
        self.isComplete = isComplete
    }

    /// The fraction of the upload done, when its size is known.
    public var uploadFraction: Double? {
        totalBytesToSend.flatMap { $0 > 0 ? Double(bytesSent) / Double($0) : nil }
    }

    /// The fraction of the download done, when its size is known.
    public var downloadFraction: Double? {
        totalBytesToReceive.flatMap { $0 > 0 ? Double(bytesReceived) / Double($0) : nil }
    }
}
