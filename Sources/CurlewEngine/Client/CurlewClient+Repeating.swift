extension CurlewClient {
    /// Sends requests one after another, each chosen by `next` as the last one ends, response bodies read and
    /// dropped: a load generator's worker with no task switch, continuation, transfer or response per request.
    ///
    /// The requests go out on one transfer and one easy handle, re-added to libcurl as they are when the next request
    /// is the same plain GET (raw libcurl's own loop), configured again otherwise. Every check of a single request
    /// still holds per request: the state machine, timeouts, the size limits of ``executeDiscardingBody(_:)``, the
    /// check of reused connections, fresh-connection retries.
    ///
    /// `next` runs on the event loop's thread after each request, outside libcurl, with its outcome, and returns the
    /// index in `requests` of the next request, or nil to stop. It must be quick and must not block: the loop's
    /// other transfers wait while it runs. It sees every request it chose, failed ones included (one that cannot
    /// start fails at once). Cancelling the calling task fails the request in flight (`next` sees
    /// `CancellationError`) and ends the repeat, as does a shutdown of the client.
    ///
    /// With a logger or a tracer (logs and spans per request), or a request body that can be read only once, each
    /// request runs through ``executeDiscardingBody(_:)`` instead, with the same calls of `next`.
    nonisolated(nonsending) package func executeRepeatedly(
        _ requests: [CurlewRequest], startingAt first: Int,
        next: @escaping @Sendable (Result<RepeatedResponse, any Error>) -> Int?
    ) async {
        guard requests.indices.contains(first) else { return }
        let repeatable = requests.allSatisfy(\.isRepeatable)
        await executeRepeatedly(.list(requests), startingAt: first, allRepeatable: repeatable, next: next)
    }

    /// ``executeRepeatedly(_:startingAt:next:)`` with each request made on the loop for the number `next` returns
    /// (a load test's request number): `make` fills a template, for instance. `make` returning nil ends the repeat;
    /// so does a request with a logger or a body that can be read only once.
    nonisolated(nonsending) package func executeRepeatedly(
        making make: @escaping @Sendable (Int) -> CurlewRequest?, startingAt first: Int,
        next: @escaping @Sendable (Result<RepeatedResponse, any Error>) -> Int?
    ) async {
        await executeRepeatedly(.made(make), startingAt: first, allRepeatable: true, next: next)
    }

    nonisolated(nonsending) private func executeRepeatedly(
        _ requests: RepeatedRequests, startingAt first: Int, allRepeatable: Bool,
        next: @escaping @Sendable (Result<RepeatedResponse, any Error>) -> Int?
    ) async {
        guard let firstRequest = requests.request(first) else { return }
        guard logger == nil, tracer == nil, allRepeatable, let loop = pickLoop() else {
            await executeRepeatedlyOneByOne(requests, first: firstRequest, next: next)
            return
        }
        let transfer = Transfer(
            request: firstRequest, settings: settings, submittedAt: loop.submissionTime, sink: .discard)
        transfer.requestIndex = first
        transfer.repeater = TransferRepeater(requests: requests, next: next)
        transfer.loop = loop
        // Every outcome, the last included, has gone to `next`; what the continuation carries is not needed.
        _ = try? await submitAndWait(transfer, on: loop)
    }

    /// ``executeRepeatedly(_:startingAt:next:)`` as a loop of single requests.
    nonisolated(nonsending) private func executeRepeatedlyOneByOne(
        _ requests: RepeatedRequests, first: CurlewRequest,
        next: @Sendable (Result<RepeatedResponse, any Error>) -> Int?
    ) async {
        var request = first
        while true {
            let outcome: Result<RepeatedResponse, any Error>
            do {
                outcome = .success(RepeatedResponse(try await executeDiscardingBody(request)))
            } catch {
                outcome = .failure(error)
            }
            let chosen = next(outcome)
            // As on the loop: a cancelled caller or a failure that ends the repeat stops it once `next` has heard.
            if Task.isCancelled { return }
            if case .failure(let error) = outcome, TransferRepeater.endsRepeat(after: error) { return }
            guard let following = chosen.flatMap(requests.request) else { return }
            request = following
        }
    }
}
