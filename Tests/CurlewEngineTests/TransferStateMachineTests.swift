import Testing

@testable import CurlewEngine

@Suite("Transfer state machine")
struct TransferStateMachineTests {
    @Test func submittedTransferStarts() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(loopIsShuttingDown: false) == .start)
        #expect(machine.state == .running)
    }

    @Test func completionFinishesOnceAndAbsorbsLaterEvents() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.curlCompleted() == .finish)
        #expect(machine.curlCompleted() == .ignore)
        #expect(machine.cancelRequested() == .none)
        #expect(machine.deadlinePassed(.idle) == .none)
        #expect(machine.shutdown() == .none)
        #expect(machine.state == .finished)
    }

    @Test func cancellationOfRunningTransferRemovesItAndWinsOverLateCompletion() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.cancelRequested() == .removeAndFail(.cancelled))
        #expect(machine.curlCompleted() == .ignore)
        #expect(machine.cancelRequested() == .none)
    }

    @Test func cancellationBeforeSubmissionFailsTheSubmissionWithoutStarting() {
        var machine = TransferStateMachine()
        #expect(machine.cancelRequested() == .none)
        #expect(machine.state == .created(cancelRequested: true))
        #expect(machine.submitted(loopIsShuttingDown: false) == .fail(.cancelled))
        #expect(machine.curlCompleted() == .ignore)
    }

    @Test func submissionDuringShutdownFailsWithClientShutdown() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(loopIsShuttingDown: true) == .fail(.clientShutdown))
        #expect(machine.state == .finished)
    }

    @Test func deadlinesAndShutdownStopRunningTransfers() {
        var idle = TransferStateMachine()
        _ = idle.submitted(loopIsShuttingDown: false)
        #expect(idle.deadlinePassed(.idle) == .removeAndFail(.timeout(.idle)))

        var total = TransferStateMachine()
        _ = total.submitted(loopIsShuttingDown: false)
        #expect(total.deadlinePassed(.total) == .removeAndFail(.timeout(.total)))

        var shutdown = TransferStateMachine()
        _ = shutdown.submitted(loopIsShuttingDown: false)
        #expect(shutdown.shutdown() == .removeAndFail(.abortedByShutdown))
    }

    @Test func deadlineBeforeStartDoesNotMarkCancellation() {
        var machine = TransferStateMachine()
        #expect(machine.deadlinePassed(.idle) == .none)
        #expect(machine.submitted(loopIsShuttingDown: false) == .start)
    }

    @Test func failedStartFinishesOnce() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.startFailed() == .finish)
        #expect(machine.startFailed() == .ignore)
        #expect(machine.curlCompleted() == .ignore)
    }

    @Test func secondSubmissionChangesNothing() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.submitted(loopIsShuttingDown: false) == .ignore)
        #expect(machine.state == .running)
        #expect(machine.curlCompleted() == .finish)
        #expect(machine.submitted(loopIsShuttingDown: false) == .ignore)
    }

    @Test func unwatchableSocketStopsOnlyARunningTransfer() {
        var machine = TransferStateMachine()
        #expect(machine.socketUnwatchable() == .none)
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.socketUnwatchable() == .removeAndFail(.unwatchableSocket))
        #expect(machine.curlCompleted() == .ignore)
    }
}
