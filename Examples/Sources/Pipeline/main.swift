// A background-worker pipeline: several workers write a shared progress property and
// send an event per finished part, while a consumer renders a progress bar with
// `for await` and an observer on a Dispatch queue logs each part.
//
// Run: swift run --package-path Examples pipeline

import Dispatch
import Evented

/// One part of the job, finished by one worker.
struct Part: Sendable {
  let worker: Int
  let index: Int
}

/// Shared by every worker and consumer: a `Sendable` class with `let` properties.
final class Job: Sendable {
  let total: Int
  let partsDone = Property(0)
  let partFinished = EventSource<Part>()
  let partsLogged = Property(0)

  init(total: Int) { self.total = total }
}

func bar(_ done: Int, of total: Int) -> String {
  let width = 20
  let filled = done * width / total
  let filledPart = String(repeating: "#", count: filled)
  let emptyPart = String(repeating: ".", count: width - filled)
  return "[\(filledPart)\(emptyPart)] \(done)/\(total)"
}

let workers = 4
let partsPerWorker = 5
let job = Job(total: workers * partsPerWorker)

// Consumer 1: an observer on a serial queue logs each finished part, in commit order.
let logQueue = DispatchQueue(label: "log")
let log = job.partFinished.observe(on: .queue(logQueue)) { part in
  print("  log: worker \(part.worker) finished part \(part.index)")
  job.partsLogged.modify { $0 += 1 }
}

// Consumer 2: a task renders the progress with `for await`. `values` keeps only the
// newest undelivered value, so the renderer never falls behind and ends on the last one.
let progress = job.partsDone.values  // subscribes now
let renderer = Task {
  for await done in progress {
    print("progress: \(bar(done, of: job.total))")
    if done == job.total { break }
  }
}

// The workers: child tasks on the global concurrent executor, writing from many threads.
print("\(workers) workers, \(partsPerWorker) parts each")
await withTaskGroup(of: Void.self) { group in
  for worker in 1...workers {
    group.addTask {
      for index in 1...partsPerWorker {
        try? await Task.sleep(for: .milliseconds(Int.random(in: 2...15)))
        job.partFinished.send(Part(worker: worker, index: index))
        job.partsDone.modify { $0 += 1 }  // atomic: no update is lost
      }
    }
  }
}
await renderer.value

// Wait until the queue has logged every part.
for await logged in job.partsLogged.values where logged == job.total { break }
log.cancel()
print("done: \(job.partsDone.value) parts, \(job.partsLogged.value) logged")
print("observers left after cancel: \(job.partFinished.observerCount)")
