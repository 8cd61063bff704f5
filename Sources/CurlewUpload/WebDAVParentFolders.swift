package import CurlewEngine
import Synchronization

/// The folders a PUT needs, made with MKCOL on servers that do not make them themselves.
///
/// RFC 4918 §9.7.1 has a PUT into a folder that does not exist fail with 409 Conflict: Apache's mod_dav, sabre/dav,
/// IIS and WsgiDAV answer so, where object stores and nginx with `create_full_put_path` make the path. rclone's
/// backends make a file's parent folder before each upload; here nothing is made until the server has refused a
/// PUT with 409 and a folder above the file turned out to be missing. From then on, a file whose folder is not yet
/// known to exist has it made before it is sent: such a server reads a whole body before it answers 409, so
/// otherwise the first file of every new folder would be sent twice. A 409 for a file whose folder this run knew
/// to exist makes nothing and sends nothing again; one whose folder MKCOL then finds there (405) is sent once more,
/// as another run sharing the destination (a shard) may have made the folder between the PUT and the MKCOL.
package final class WebDAVParentFolders: Sendable {
    private let folder: WebDAVFolder
    /// The scheme and authority of the folder's URL, which every folder's path follows.
    private let origin: String
    private let state = Mutex(State())

    private struct State {
        /// Whether the server has refused a PUT into a folder that was then made.
        var serverNeedsThem = false
        /// Paths of folders (percent-encoded, ending with `/`) made, found or written into in this run.
        var existing: Set<String> = []
        /// The paths of `existing` this run's MKCOLs made.
        var made: Set<String> = []
        /// MKCOLs under way, by path: a worker that needs the same folder waits for the answer instead of sending
        /// another (WsgiDAV answers 500 to the loser of two racing MKCOLs of one folder).
        var making: [String: Task<MKCOLAnswer, Never>] = [:]
    }

    /// What one MKCOL answered, for the run's counts.
    package struct Request: Sendable {
        package let status: Int
        package let reusedConnection: Bool
    }

    /// The answer to a folder's MKCOL: the requests answered, and what the last answer means.
    private struct MKCOLAnswer: Sendable {
        var requests: [Request]
        let outcome: FolderOutcome
    }

    private enum FolderOutcome: Sendable {
        /// Made (2xx).
        case made
        /// Already there (405: MKCOL "can only be executed on an unmapped URL"; also a server that allows no MKCOL).
        case there
        /// 409: the folder above it is missing too.
        case parentMissing
        /// Any other answer, or no answer.
        case refused(Failure)
    }

    /// What making the folders above a file came to.
    package enum Outcome: Sendable {
        /// A folder was missing and is there now: the PUT is worth sending again.
        case made
        /// The file's own folder is there (MKCOL answered 405): made since the PUT by someone else sharing the
        /// destination (another shard of the run), or there all along and the 409 was about the file. Sending once
        /// more tells which.
        case foundThere
        /// A folder could not be made.
        case failed(Failure)
    }

    /// Why a folder could not be made, and what its MKCOL met, for the rules that decide whether the file's upload
    /// is tried again.
    package struct Failure: Sendable {
        /// What went wrong, for the file's failure (`MKCOL /x/ answered 403`).
        package let reason: String
        package let cause: Cause

        package enum Cause: Sendable {
            /// The server answered with this status (and `Retry-After`).
            case status(Int, retryAfter: String?)
            /// The MKCOL got no answer.
            case error(CurlewError)
            /// Anything else (the MKCOL could not be built, or was cancelled).
            case other
        }
    }

    package init(folder: WebDAVFolder) {
        self.folder = folder
        let url = folder.folderURL
        origin = String(url.folder.utf8.dropLast(url.path.utf8.count))!
    }

    /// The folders above the file at `relativePath`, outermost first: those of the folder's own path below `/`,
    /// the folder itself, then the file's own folders under it. Each path is percent-encoded and ends with `/`.
    package func folderPaths(above relativePath: String) -> [String] {
        var paths: [String] = []
        var path = "/"
        for segment in PercentEncoding.segments(of: folder.folderURL.path, omittingEmpty: true) {
            path += segment + "/"
            paths.append(path)
        }
        for segment in PercentEncoding.segments(of: relativePath, omittingEmpty: true).dropLast() {
            path += PercentEncoding.encodeComponent(String(segment)) + "/"
            paths.append(path)
        }
        return paths
    }

    /// Whether this run knows the folder of the file at `relativePath` to exist (made, found, or written into).
    package func knowsFolder(of relativePath: String) -> Bool {
        guard let innermost = folderPaths(above: relativePath).last else { return true }
        return state.withLock { $0.existing.contains(innermost) }
    }

    /// Before a file is sent: once the server has refused a PUT into a missing folder, makes the file's folders
    /// unless this run already knows they exist. A folder that cannot be made is left to the PUT's own answer.
    package func prepare(for relativePath: String, made: (Request) -> Void) async {
        guard state.withLock({ $0.serverNeedsThem }), !knowsFolder(of: relativePath) else { return }
        _ = await make(folderPaths(above: relativePath), made: made)
    }

    /// After the PUT of the file at `relativePath` was refused with 409, its folder not known before it was sent:
    /// makes the folders above it, starting at the innermost and going out while the server answers 409 (its
    /// parent is missing too), then back in.
    package func makeAfterConflict(for relativePath: String, made: (Request) -> Void) async -> Outcome {
        let outcome = await make(folderPaths(above: relativePath), made: made)
        if case .made = outcome { state.withLock { $0.serverNeedsThem = true } }
        return outcome
    }

    /// Before a body that cannot be sent twice (a stream) is PUT to `url`: makes the folders above it, whatever the
    /// server, as waiting for a 409 would lose the body. A server whose folders are there answers one MKCOL with
    /// 405; a server that is not WebDAV answers it with a refusal, which the PUT's own answer then overrules.
    package static func makeBeforeSending(
        to url: String, client: CurlewClient, headers: [(name: String, value: String)]
    ) async -> Outcome {
        // A URL that names a folder (`…/dir/`): its parent is the one the PUT needs, not the folder itself.
        guard let parent = FolderURL(parentOf: url) else { return .foundThere }
        let folders = WebDAVParentFolders(folder: WebDAVFolder(baseURL: parent.url, client: client, headers: headers))
        // Only the folder's own paths: the file's name below it has no folders.
        return await folders.make(folders.folderPaths(above: "file"), made: { _ in })
    }

    /// After a file was sent: its folders exist.
    package func fileSent(_ relativePath: String) {
        guard state.withLock({ $0.serverNeedsThem }) else { return }
        let paths = folderPaths(above: relativePath)
        state.withLock { $0.existing.formUnion(paths) }
    }

    private func make(_ paths: [String], made: (Request) -> Void) async -> Outcome {
        guard let innermost = paths.last else { return .foundThere }
        // Known now but not before the PUT: another worker made it, or found it, meanwhile.
        if let known = state.withLock({ $0.existing.contains(innermost) ? $0.made.contains(innermost) : nil }) {
            return known ? .made : .foundThere
        }
        let cancelled = Failure(reason: "cancelled", cause: .other)
        // Out from the innermost folder to the first one there (known, made, or found by a 405).
        var present = paths.count - 1
        while present >= 0 {
            if Task.isCancelled { return .failed(cancelled) }
            if state.withLock({ $0.existing.contains(paths[present]) }) { break }
            switch await makeFolder(paths[present], made: made) {
            case .made: break
            case .there:
                // The file's own folder is there: nothing to make, nothing more to learn from MKCOL.
                if present == paths.count - 1 { return .foundThere }
            case .parentMissing:
                present -= 1
                continue
            case .refused(let failure): return .failed(failure)
            }
            break
        }
        guard present >= 0 else {
            return .failed(
                Failure(reason: "MKCOL \(paths[0]) answered 409 Conflict", cause: .status(409, retryAfter: nil)))
        }
        // Back in: each folder below the one there.
        for path in paths[(present + 1)...] {
            if Task.isCancelled { return .failed(cancelled) }
            switch await makeFolder(path, made: made) {
            case .made, .there: continue
            case .parentMissing:
                return .failed(
                    Failure(
                        reason: "MKCOL \(path) answered 409 Conflict after its parent was made",
                        cause: .status(409, retryAfter: nil)))
            case .refused(let failure): return .failed(failure)
            }
        }
        return .made
    }

    /// One MKCOL of `path`, or the answer of the one another worker is sending; a folder made or there is known
    /// from then on.
    private func makeFolder(_ path: String, made: (Request) -> Void) async -> FolderOutcome {
        let (task, isMine) = state.withLock { state -> (Task<MKCOLAnswer, Never>, Bool) in
            if let running = state.making[path] { return (running, false) }
            let task = Task { await self.sendMKCOL(path) }
            state.making[path] = task
            return (task, true)
        }
        // A run being stopped stops its workers together: the MKCOL they share goes with them.
        let answer = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        if isMine {
            state.withLock { _ = $0.making.removeValue(forKey: path) }
            answer.requests.forEach(made)
        }
        return answer.outcome
    }

    /// The MKCOL of `path`, sent once more after a 500: WsgiDAV answers 500 to the loser of two MKCOLs of one
    /// folder, which workers of one run never send (they share one) but two runs sharing the destination (shards)
    /// do; the second answers 405 when the other made it.
    private func sendMKCOL(_ path: String) async -> MKCOLAnswer {
        let first = await sendMKCOLOnce(path)
        guard case .refused(let failure) = first.outcome, case .status(500, _) = failure.cause else { return first }
        var second = await sendMKCOLOnce(path)
        second.requests = first.requests + second.requests
        return second
    }

    private func sendMKCOLOnce(_ path: String) async -> MKCOLAnswer {
        do {
            var request = try CurlewRequest(method: .init("MKCOL")!, url: origin + path + folder.folderURL.query)
            // The run's headers are for the destination (credentials, tokens); those about a body are the files'.
            for (name, value) in folder.headers where !name.lowercased().hasPrefix("content-") {
                try request.addHeader(name, value)
            }
            let response = try await folder.client.execute(request)
            let status = Int(response.status.code)
            let outcome: FolderOutcome
            switch status {
            case 200..<300: outcome = .made
            case 405: outcome = .there
            case 409: outcome = .parentMissing
            default:
                outcome = .refused(
                    Failure(
                        reason: "MKCOL \(path) answered \(status)",
                        cause: .status(status, retryAfter: response.header("Retry-After"))))
            }
            // Known before the MKCOL counts as done, so a worker that finds no MKCOL under way finds this.
            switch outcome {
            case .made:
                state.withLock {
                    $0.existing.insert(path)
                    $0.made.insert(path)
                }
            case .there: state.withLock { _ = $0.existing.insert(path) }
            case .parentMissing, .refused: break
            }
            return MKCOLAnswer(
                requests: [Request(status: status, reusedConnection: response.metrics.reusedConnection)],
                outcome: outcome)
        } catch let error as CurlewError {
            let reason = "MKCOL \(path) failed: \(error.code.name): \(error.detail)"
            return MKCOLAnswer(requests: [], outcome: .refused(Failure(reason: reason, cause: .error(error))))
        } catch {
            return MKCOLAnswer(
                requests: [], outcome: .refused(Failure(reason: "MKCOL \(path) failed: \(error)", cause: .other)))
        }
    }
}
