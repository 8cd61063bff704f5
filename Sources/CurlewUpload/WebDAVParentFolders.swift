import CurlewEngine
import Synchronization

/// The folders a PUT needs, made with MKCOL on servers that do not make them themselves.
///
/// RFC 4918 §9.7.1 has a PUT into a folder that does not exist fail with 409 Conflict: Apache's mod_dav, sabre/dav,
/// IIS and nginx without `create_full_put_path` answer so, where object stores and nginx with it make the path.
/// rclone's backends make a file's parent folder before each upload; here nothing is made until the server has
/// refused a PUT with 409, so destinations that need no MKCOL never get one. From then on, a file whose folder is
/// not yet known to exist has it made before it is sent: such a server reads a whole body before it answers 409, so
/// otherwise every first file of a new folder would be sent twice.
package final class WebDAVParentFolders: Sendable {
    private let folder: WebDAVFolder
    /// The scheme and authority of the folder's URL, which every folder's path follows.
    private let origin: String
    private let state = Mutex(State())

    private struct State {
        /// Whether the server has refused a PUT into a missing folder.
        var serverNeedsThem = false
        /// Paths of folders (percent-encoded, ending with `/`) made, found or written into in this run.
        var existing: Set<String> = []
    }

    /// What one MKCOL answered, for the run's counts.
    package struct Request: Sendable {
        package let status: Int
        package let reusedConnection: Bool
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

    /// Before a file is sent: once the server has refused a PUT into a missing folder, makes the file's folders
    /// unless this run already knows they exist. A folder that cannot be made is left to the PUT's own answer.
    package func prepare(for relativePath: String, made: (Request) -> Void) async {
        let paths = folderPaths(above: relativePath)
        let needed = state.withLock { state in
            state.serverNeedsThem && !(paths.last.map(state.existing.contains) ?? true)
        }
        if needed { _ = await make(paths, made: made) }
    }

    /// After the PUT of the file at `relativePath` was refused with 409: makes the folders above it, starting at
    /// the innermost and going out while the server answers 409 (its parent is missing too), then back in.
    ///
    /// - Returns: nil when every folder is there now, so the PUT is worth sending again; otherwise why not.
    package func makeAfterConflict(for relativePath: String, made: (Request) -> Void) async -> String? {
        state.withLock { $0.serverNeedsThem = true }
        return await make(folderPaths(above: relativePath), made: made)
    }

    /// After a file was sent: its folders exist.
    package func fileSent(_ relativePath: String) {
        guard state.withLock({ $0.serverNeedsThem }) else { return }
        let paths = folderPaths(above: relativePath)
        state.withLock { $0.existing.formUnion(paths) }
    }

    private func make(_ paths: [String], made: (Request) -> Void) async -> String? {
        guard !paths.isEmpty else { return "no folder above the file to make" }
        let known = state.withLock { state in paths.map(state.existing.contains) }
        // Out from the innermost folder to the first one there (known, made, or found by a 405).
        var present = paths.count - 1
        while present >= 0, !known[present] {
            switch await makeFolder(paths[present], made: made) {
            case .there: break
            case .parentMissing:
                present -= 1
                continue
            case .refused(let reason): return reason
            }
            break
        }
        guard present >= 0 else { return "MKCOL \(paths[0]) answered 409 Conflict" }
        // Back in: each folder below the one there.
        for path in paths[(present + 1)...] {
            switch await makeFolder(path, made: made) {
            case .there: continue
            case .parentMissing: return "MKCOL \(path) answered 409 Conflict after its parent was made"
            case .refused(let reason): return reason
            }
        }
        return nil
    }

    private enum FolderOutcome {
        /// Made (2xx), or already there (405: MKCOL "can only be executed on an unmapped URL").
        case there
        /// 409: the folder above it is missing too.
        case parentMissing
        /// Any other answer, or no answer: why.
        case refused(String)
    }

    private func makeFolder(_ path: String, made: (Request) -> Void) async -> FolderOutcome {
        do {
            var request = try CurlewRequest(method: .init("MKCOL")!, url: origin + path + folder.folderURL.query)
            // The run's headers are for the destination (credentials, tokens); those about a body are the files'.
            for (name, value) in folder.headers where !name.lowercased().hasPrefix("content-") {
                try request.addHeader(name, value)
            }
            let response = try await folder.client.execute(request)
            let status = Int(response.status.code)
            made(Request(status: status, reusedConnection: response.metrics.reusedConnection))
            switch status {
            case 200..<300, 405:
                state.withLock { _ = $0.existing.insert(path) }
                return .there
            case 409: return .parentMissing
            default: return .refused("MKCOL \(path) answered \(status)")
            }
        } catch let error as CurlewError {
            return .refused("MKCOL \(path) failed: \(error.code.name): \(error.detail)")
        } catch {
            return .refused("MKCOL \(path) failed: \(error)")
        }
    }
}
