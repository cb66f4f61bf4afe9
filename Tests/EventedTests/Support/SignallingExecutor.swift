import Dispatch

/// An executor for the tasks whose progress a test waits on: it runs each job on a
/// dispatch thread and signals ``Changes`` after it, so that `settles` re-checks once
/// the task has suspended.
///
/// For conditions that only a task's own progress decides, with nothing to signal them:
/// a sender suspended in a wait of the library. Give the task this preference
/// (`Task(executorPreference: SignallingExecutor.shared)`). The code it runs on a
/// default actor that no other task holds at the time runs here too, so keep the test's
/// own reads off that actor while it waits.
final class SignallingExecutor: TaskExecutor {
  static let shared = SignallingExecutor()

  private init() {}

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    DispatchQueue.global().async {
      job.runSynchronously(on: self.asUnownedTaskExecutor())
      Changes.signal()
    }
  }
}
