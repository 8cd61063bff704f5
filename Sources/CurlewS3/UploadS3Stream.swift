import Crypto
import CurlewEngine
import Foundation

/// How a stream of unknown length is cut into multipart-upload parts so that S3's 10,000 parts always suffice:
/// the first 1,000 parts have the requested size, and the size doubles every 1,000 parts after (capped at S3's
/// 5 GiB). Starting at S3's smallest part (5 MiB), 10,000 parts hold 5 MiB × 1,000 × (1 + 2 + … + 512) ≈ 5 TiB,
/// S3's largest object; a stream that fits in the first 1,000 parts is cut exactly as a file of its size with that
/// part size would be. S3 allows parts of different sizes (all but the last at least 5 MiB); the memory held is
/// the parts in flight, which grows only for streams beyond 1,000 parts.
package struct StreamPartSizing: Sendable, Equatable {
    package static let partsPerSize = 1_000
    package let firstPartSize: Int64

    /// - Parameter requestedPartSize: `--part-size`, clamped to S3's 5 MiB to 5 GiB.
    package init(requestedPartSize: Int64) {
        firstPartSize = min(max(requestedPartSize, PartPlan.minimumPartSize), PartPlan.maximumPartSize)
    }

    /// The size of part `number` (1-based).
    package func size(ofPart number: Int) -> Int64 {
        let doublings = min(max(number - 1, 0) / Self.partsPerSize, 20)
        return min(firstPartSize << doublings, PartPlan.maximumPartSize)
    }

    /// The longest stream 10,000 parts hold.
    package var capacity: Int64 {
        (1...Int(PartPlan.maximumParts)).reduce(Int64(0)) { $0 + size(ofPart: $1) }
    }
}

/// What a streamed upload stored.
public struct S3StreamUpload: Sendable, Hashable {
    /// The bytes the stream had.
    public let bytes: Int64
    /// The parts of the multipart upload; 0 when the stream fitted in one part and went as a single PUT.
    public let parts: Int
    /// The whole stream's SHA-256, in hex.
    public let sha256: String
    /// Whether the SHA-256 is stored with the object (`x-amz-meta-curlew-sha256`): always for a single PUT; for a
    /// multipart upload the object is copied onto itself with the metadata once it is complete (S3 takes metadata
    /// only when an upload starts, before a stream's checksum is known), which S3's CopyObject allows up to 5 GiB.
    /// False when the store refused the copy, or the key no longer held the object this upload completed. A copy
    /// that seemed to fail (its reply lost or cut) counts when a HEAD finds the metadata on the object.
    public let sha256Stored: Bool
}

/// Uploads a stream of unknown length (a pipe) as one object, in constant memory: the parts in flight and the one
/// being read. Every part carries its SHA-256, the store's composite checksum is checked, and the whole stream's
/// SHA-256 is computed as it is read.
package final class S3StreamUploader: Sendable {
    package let client: S3Client
    package let options: S3ObjectOptions
    private let sizing: StreamPartSizing

    package init(client: S3Client, options: S3ObjectOptions) {
        self.client = client
        self.options = options
        self.sizing = StreamPartSizing(requestedPartSize: options.partSize)
    }

    /// - Parameters:
    ///   - read: the next bytes of the stream, at most the count asked for; empty at its end.
    ///   - partStored: called with each stored part's number and size.
    package func upload(
        key: String, read: @escaping @Sendable (Int) async throws -> [UInt8],
        partStored: @escaping @Sendable (_ number: Int, _ size: Int64) -> Void = { _, _ in }
    ) async throws(S3RequestFailure) -> S3StreamUpload {
        let contentType = options.contentType ?? UploadContentType.forPath(key)
        var hasher = SHA256()
        let first = try await Self.readFull(sizing.size(ofPart: 1), from: read)
        hasher.update(data: first)
        guard Int64(first.count) == sizing.size(ofPart: 1) else {
            // The whole stream fits in one part: one PUT, its SHA-256 known before it goes.
            let digest = hasher.finalize()
            let hex = SHA256Hex(digest).text
            let reply = try await client.send(
                .put, key: key,
                headers: [("content-type", contentType), ("x-amz-checksum-sha256", Data(digest).base64EncodedString())]
                    + options.objectHeaders(wholeFileSHA256: options.recordsWholeFileSHA256 ? hex : nil),
                body: .bytes(first))
            if let stored = reply.header("x-amz-checksum-sha256"), stored != Data(digest).base64EncodedString() {
                throw .transport("the store's SHA-256 \(stored) differs from the stream's")
            }
            return S3StreamUpload(
                bytes: Int64(first.count), parts: 0, sha256: hex, sha256Stored: options.recordsWholeFileSHA256)
        }

        let created = try await client.send(
            .post, key: key, query: [("uploads", "")],
            headers: [("content-type", contentType), ("x-amz-checksum-algorithm", "SHA256")]
                + options.objectHeaders(wholeFileSHA256: nil))
        guard let uploadID = S3XML.value("UploadId", in: created.text), !uploadID.isEmpty else {
            throw .transport("CreateMultipartUpload's reply has no UploadId")
        }
        do throws(S3RequestFailure) {
            let (parts, total) = try await sendParts(
                first: first, hasher: &hasher, key: key, uploadID: uploadID, read: read, partStored: partStored)
            let completion = try await client.send(
                .post, key: key, query: [("uploadId", uploadID)],
                body: .bytes(Array(CompletedPart.completionXML(parts).utf8)), allowing: [404],
                expectsDocument: true)
            let checker = S3Uploader(client: client, options: options, journal: nil)
            let completedETag: String?
            if completion.status == 404 {
                // The upload is gone. An attempt whose reply was lost may have completed it (its retry finds it so):
                // the object is this stream's when its size and the store's checksum of its parts are.
                guard let head = await checker.headOfObjectCompleted(from: parts, size: total, key: key) else {
                    throw .transport(
                        S3ErrorReply(status: 404, body: completion.body).summary
                            + "; an earlier attempt may have completed the upload, but the object at the key cannot"
                            + " be confirmed as this stream's (the store reports no SHA-256 of its parts, or another"
                            + " size)")
                }
                completedETag = head.header("etag")
            } else {
                try await checker.verifyComposite(parts: parts, completion: completion.text, key: key)
                completedETag = S3XML.value("ETag", in: completion.text)
            }
            let hex = SHA256Hex(hasher.finalize()).text
            let stored =
                options.recordsWholeFileSHA256 && total <= PartPlan.maximumPartSize
                ? await recordSHA256(
                    hex, size: total, key: key, ofObjectTagged: completedETag, contentType: contentType) : false
            return S3StreamUpload(bytes: total, parts: parts.count, sha256: hex, sha256Stored: stored)
        } catch {
            // Nothing half-made stays behind: the parts are dropped (and no longer billed).
            _ = try? await client.send(
                .delete, key: key, query: [("uploadId", uploadID)], allowing: [404], cleanup: true)
            throw error
        }
    }

    /// Reads parts and sends them, up to the client's concurrency at once; the first failure stops the rest.
    private func sendParts(
        first: [UInt8], hasher: inout SHA256, key: String, uploadID: String,
        read: @escaping @Sendable (Int) async throws -> [UInt8],
        partStored: @escaping @Sendable (_ number: Int, _ size: Int64) -> Void
    ) async throws(S3RequestFailure) -> (parts: [CompletedPart], bytes: Int64) {
        var hashed = hasher
        let outcome = await withTaskGroup(of: Result<CompletedPart, S3RequestFailure>.self) {
            group -> Result<(parts: [CompletedPart], bytes: Int64), S3RequestFailure> in
            var finished: [CompletedPart] = []
            var inFlight = 0
            var number = 1
            var next = first
            var total: Int64 = 0
            func collectOne() async -> S3RequestFailure? {
                guard let result = await group.next() else { return nil }
                inFlight -= 1
                switch result {
                case .success(let part):
                    partStored(part.number, part.size)
                    finished.append(part)
                    return nil
                case .failure(let failure):
                    group.cancelAll()
                    return failure
                }
            }
            while !next.isEmpty {
                guard number <= Int(PartPlan.maximumParts) else {
                    group.cancelAll()
                    return .failure(.transport("the stream is longer than S3's 10,000 parts hold (\(total) bytes)"))
                }
                let bytes = next
                let partNumber = number
                total += Int64(bytes.count)
                group.addTask { await self.sendPart(partNumber, bytes, key: key, uploadID: uploadID) }
                inFlight += 1
                if inFlight >= client.concurrency, let failure = await collectOne() { return .failure(failure) }
                do {
                    next = try await Self.readFull(sizing.size(ofPart: number + 1), from: read)
                } catch {
                    group.cancelAll()
                    return .failure(.transport("reading the input failed: \(error)"))
                }
                hashed.update(data: next)
                number += 1
            }
            while inFlight > 0 {
                if let failure = await collectOne() { return .failure(failure) }
            }
            return .success((finished.sorted { $0.number < $1.number }, total))
        }
        hasher = hashed
        return try outcome.get()
    }

    private func sendPart(
        _ number: Int, _ bytes: [UInt8], key: String, uploadID: String
    ) async -> Result<
        CompletedPart, S3RequestFailure
    > {
        let checksum = Data(SHA256.hash(data: bytes)).base64EncodedString()
        do throws(S3RequestFailure) {
            let reply = try await client.send(
                .put, key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)],
                headers: [("x-amz-checksum-sha256", checksum)], body: .bytes(bytes))
            guard let etag = reply.header("etag"), !etag.isEmpty else {
                return .failure(.transport("part \(number): the reply has no ETag"))
            }
            if let stored = reply.header("x-amz-checksum-sha256"), stored != checksum {
                return .failure(.transport("part \(number): the store's SHA-256 \(stored) differs from the stream's"))
            }
            return .success(CompletedPart(number: number, etag: etag, checksum: checksum, size: Int64(bytes.count)))
        } catch {
            return .failure(error)
        }
    }

    /// CopyObject onto itself with the metadata replaced, the whole stream's SHA-256 among it; whether the store
    /// took it.
    ///
    /// The object is complete by then, so a copy that fails does not fail the upload: a key allowed to write
    /// objects but not to read them (a write-only backup key) is refused CopyObject, which reads its source. The
    /// copy is made only of the object this upload completed (`x-amz-copy-source-if-match` with its ETag): another
    /// writer may replace the key in between, and this stream's SHA-256 must not be stamped on their object. A store
    /// whose completion names no ETag gets no copy.
    ///
    /// A copy that seems to fail may have been made: its reply lost, the retry then finds the object changed by the
    /// first attempt (412 against the completion's ETag). So a failed copy is followed by a HEAD, and the object's
    /// own metadata says whether it carries this stream's SHA-256.
    private func recordSHA256(
        _ hex: String, size: Int64, key: String, ofObjectTagged etag: String?, contentType: String
    ) async -> Bool {
        guard let etag, !etag.isEmpty else { return false }
        let source = "/" + client.endpoint.bucket + "/" + PercentEncoding.encodeEachSegment(of: key)
        do throws(S3RequestFailure) {
            // A 200 with an error document, or without a whole result, is thrown by `send` (and retried).
            _ = try await client.send(
                .put, key: key,
                headers: [
                    ("content-type", contentType), ("x-amz-copy-source", source), ("x-amz-copy-source-if-match", etag),
                    ("x-amz-metadata-directive", "REPLACE"), ("x-amz-checksum-algorithm", "SHA256"),
                ] + options.objectHeaders(wholeFileSHA256: hex),
                expectsDocument: true,
                // A refusal here is this copy's (retried when retryable), not the run's.
                refusalStopsTheRun: false)
            return true
        } catch .cancelled {
            return false
        } catch {
            return await objectCarriesSHA256(hex, size: size, key: key)
        }
    }

    /// Whether the object at `key` is `size` bytes and has `hex` as its recorded SHA-256. A refused HEAD (a
    /// write-only key may not read) is "no", never a problem of the run.
    private func objectCarriesSHA256(_ hex: String, size: Int64, key: String) async -> Bool {
        guard
            let head = try? await client.send(.head, key: key, allowing: [404], refusalStopsTheRun: false),
            head.status == 200, head.header("content-length").flatMap({ Int64($0) }) == size
        else { return false }
        return head.header("x-amz-meta-" + S3Uploader.wholeFileSHA256MetadataName)?.lowercased() == hex
    }

    /// Reads until `count` bytes or the end of the stream.
    private static func readFull(
        _ count: Int64, from read: @Sendable (Int) async throws -> [UInt8]
    ) async throws(S3RequestFailure) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(count))
        while Int64(bytes.count) < count {
            let chunk: [UInt8]
            do {
                chunk = try await read(Int(min(count - Int64(bytes.count), 1 << 20)))
            } catch {
                throw .transport("reading the input failed: \(error)")
            }
            if chunk.isEmpty { break }
            bytes += chunk
        }
        return bytes
    }
}
