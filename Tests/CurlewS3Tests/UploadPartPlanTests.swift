import Testing

@testable import CurlewS3

@Suite struct UploadPartPlanTests {
    @Test func aFileUpToOnePartIsASinglePut() {
        #expect(!PartPlan(fileSize: 16 << 20, requestedPartSize: 16 << 20).isMultipart)
        #expect(!PartPlan(fileSize: 0, requestedPartSize: 16 << 20).isMultipart)
        #expect(PartPlan(fileSize: (16 << 20) + 1, requestedPartSize: 16 << 20).isMultipart)
    }

    @Test func partsCoverTheFileExactlyWithAShortLastPart() {
        let plan = PartPlan(fileSize: 50 << 20, requestedPartSize: 16 << 20)
        #expect(plan.parts.map(\.number) == [1, 2, 3, 4])
        #expect(plan.parts.map(\.length) == [16 << 20, 16 << 20, 16 << 20, 2 << 20])
        #expect(plan.parts.map(\.offset) == [0, 16 << 20, 32 << 20, 48 << 20])
        #expect(plan.parts.reduce(0) { $0 + $1.length } == plan.fileSize)
    }

    @Test func thePartSizeGrowsSoAHugeFileFitsTenThousandParts() {
        // 1 TiB at 16 MiB would be 65,536 parts.
        let plan = PartPlan(fileSize: 1 << 40, requestedPartSize: 16 << 20)
        #expect(plan.partCount <= 10_000)
        #expect(plan.partSize % (1 << 20) == 0)
        #expect(plan.partSize == 105 << 20)
        let largest = PartPlan(fileSize: PartPlan.maximumObjectSize, requestedPartSize: 5 << 20)
        #expect(largest.partCount <= 10_000)
        #expect(largest.partSize <= PartPlan.maximumPartSize)
    }

    @Test func aSixGiBFileIsMultipart() {
        let plan = PartPlan(fileSize: 6 << 30, requestedPartSize: 16 << 20)
        #expect(plan.partCount == 384)
        #expect(plan.parts.last!.offset + plan.parts.last!.length == 6 << 30)
    }
}
