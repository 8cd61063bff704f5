import CurlewSharding
import Foundation

extension ShardSet {
    /// The result files `curlew merge` was given: files as they are, directories searched (not recursively) for
    /// `bench…json` and `upload…json`.
    static func resultFiles(in paths: [String]) throws(CommandFailure) -> [String] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw CommandFailure("\(path.debugDescription) does not exist")
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            files += names.filter { name in
                (name.hasPrefix("bench") || name.hasPrefix("upload")) && name.hasSuffix(".json")
                    && !name.hasSuffix(".histogram.json")
            }.sorted().map { (path as NSString).appendingPathComponent($0) }
        }
        return files
    }
}
