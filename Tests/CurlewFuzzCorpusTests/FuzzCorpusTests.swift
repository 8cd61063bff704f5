import CurlewFuzzProperties
import Foundation
import Testing

/// Every fuzz target's corpus (`Tests/Fuzz/Corpus/NAME/`: the seeds, and each input a fuzzer once failed on)
/// replayed through the target's property in the ordinary suite, so a fixed finding stays fixed without libFuzzer.
struct FuzzCorpusTests {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")

    @Test(arguments: FuzzTarget.all.map(\.name))
    func everyCorpusInputHoldsTheProperty(target name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        let directory = Self.corpusRoot.appendingPathComponent(name)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(files.count >= 3, "the \(name) corpus should hold seeds")
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: directory.appendingPathComponent(file)))
            #expect(target.check(bytes) == nil, "\(name)/\(file)")
        }
    }

    @Test func targetsAreFoundByTheirUniqueNamesAndEachHasACorpus() throws {
        #expect(FuzzTarget.named("no-such-target") == nil)
        #expect(Set(FuzzTarget.all.map(\.name)).count == FuzzTarget.all.count, "target names are unique")
        let corpora = try FileManager.default.contentsOfDirectory(atPath: Self.corpusRoot.path)
        #expect(Set(corpora) == Set(FuzzTarget.all.map(\.name)), "one corpus folder per target, and no other")
    }
}
