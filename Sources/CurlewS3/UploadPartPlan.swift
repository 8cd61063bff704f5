/// How one file is cut into multipart-upload parts, within S3's limits: parts of at least 5 MiB (but the last),
/// at most 5 GiB, at most 10,000 of them. A part size too small for the file is raised, in whole MiB, so the file
/// fits in 10,000 parts.
package struct PartPlan: Sendable, Equatable {
    package static let minimumPartSize: Int64 = 5 << 20
    package static let maximumPartSize: Int64 = 5 << 30
    package static let maximumParts: Int64 = 10_000
    /// S3's largest object: 5 TiB.
    package static let maximumObjectSize: Int64 = 5 << 40

    package struct Part: Sendable, Equatable {
        /// 1-based, as S3 numbers them.
        let number: Int
        let offset: Int64
        let length: Int64
    }

    package let fileSize: Int64
    package let partSize: Int64

    /// - Parameter requestedPartSize: `--part-size`, already checked to be within S3's limits.
    package init(fileSize: Int64, requestedPartSize: Int64) {
        self.fileSize = fileSize
        let mebibyte: Int64 = 1 << 20
        let smallestFitting = (fileSize + Self.maximumParts - 1) / Self.maximumParts
        let roundedUp = (smallestFitting + mebibyte - 1) / mebibyte * mebibyte
        self.partSize = min(max(requestedPartSize, roundedUp, Self.minimumPartSize), Self.maximumPartSize)
    }

    /// Files up to one part go as a single PUT.
    package var isMultipart: Bool { fileSize > partSize }

    package var partCount: Int { fileSize == 0 ? 1 : Int((fileSize + partSize - 1) / partSize) }

    package var parts: [Part] {
        (0..<partCount).map { index in
            let offset = Int64(index) * partSize
            return Part(number: index + 1, offset: offset, length: min(partSize, fileSize - offset))
        }
    }
}
