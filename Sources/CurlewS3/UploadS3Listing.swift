import CurlewEngine
import Foundation

/// An object as ListObjectsV2 describes it.
package struct S3ListedObject: Sendable, Equatable {
    package let key: String
    package let size: Int64
}

extension S3XML {
    /// One page of ListObjectsV2: its objects, and the token of the next page if the listing is truncated.
    package static func parseObjectListing(_ xml: String) -> (objects: [S3ListedObject], nextToken: String?) {
        let objects = elements("Contents", in: xml).compactMap { block -> S3ListedObject? in
            guard let key = value("Key", in: block), let size = value("Size", in: block).flatMap({ Int64($0) }) else {
                return nil
            }
            return S3ListedObject(key: key, size: size)
        }
        let truncated = value("IsTruncated", in: xml) == "true"
        return (objects, truncated ? value("NextContinuationToken", in: xml) : nil)
    }
}

extension S3Client {
    /// Every object whose key starts with `prefix`, page after page (ListObjectsV2, `pageSize` keys a page: S3's
    /// most is 1,000).
    package func listObjects(prefix: String, pageSize: Int = 1_000) async throws(S3RequestFailure) -> [S3ListedObject] {
        var objects: [S3ListedObject] = []
        var token: String?
        repeat {
            var query: [(name: String, value: String)] = [
                ("list-type", "2"), ("max-keys", String(pageSize)), ("prefix", prefix),
            ]
            if let token { query.append(("continuation-token", token)) }
            let reply = try await send(.get, key: "", query: query)
            let page = S3XML.parseObjectListing(reply.text)
            objects += page.objects
            // A truncated page without a token would list the same page forever.
            if page.nextToken != nil && page.nextToken == token { throw .transport("ListObjectsV2 repeated its token") }
            token = page.nextToken
        } while token != nil
        return objects
    }

    /// DeleteObject; an object already gone counts as deleted.
    package func deleteObject(key: String) async throws(S3RequestFailure) {
        _ = try await send(.delete, key: key, allowing: [404])
    }
}
