// Promise 2: handlers, an owner's deinit and the release of captured values never run
// while an internal lock is held.
//
// Each test runs user code that, from inside, calls into the same source on ANOTHER
// thread and waits for that call with a bounded wait. Every such call takes the
// source's lock, so if the lock were held around the user code the call could not
// finish and the wait would time out.
//
// The actor variants do not run here. ActorEventSource and ActorProperty keep their
// state under actor isolation, not under a lock, and their handlers run in a task of
// their own, off the actor, so a handler holds nothing that a call into its source
// needs. Their one lock, the queue of messages pending for one subscription, lives
// inside that subscription and is not reachable through a subject.

import Dispatch
import Testing

@testable import Evented

/// Calls members that take `subject`'s lock, on another thread, and reports whether
/// they finished.
private func lockIsFree(in subject: any EventSubject) -> Bool {
  completesOnAnotherThread {
    _ = subject.observerCount
    let probe = subject.observe { _ in }
    probe.cancel()
  }
}

/// How a subscription is ended in the tests of capture release.
enum Ending: String, CaseIterable, Sendable, CustomStringConvertible {
  case cancel
  case cancelInsideHandler
  case ownerDiesThenSend
  case handleReleased

  var description: String { rawValue }
}

@Suite struct NoUserCodeUnderALockContract {
  @Test(arguments: EventSubjectKind.allCases)
  func noUserCodeRunsUnderALockWhileAHandlerRuns(_ kind: EventSubjectKind) {
    let subject = kind.make()
    let checks = Recorder<Bool>()
    let subscription = subject.observe { event in
      guard event == 1 else { return }
      checks.append(lockIsFree(in: subject))
      checks.append(completesOnAnotherThread { subject.send(2) })
    }
    subject.send(1)
    #expect(checks.values == [true, true])
    subscription.cancel()
  }

  @Test(arguments: [Delivery.synchronous, .queue(DispatchQueue(label: "handler-lock"))])
  func noUserCodeRunsUnderALockWhilePropertyHandlerRuns(_ delivery: Delivery) {
    let property = Property(0)
    let checks = Recorder<Bool>()
    let subscription = property.observe(on: delivery) { value in
      checks.append(completesOnAnotherThread { _ = property.value })
      if value == 0 { checks.append(completesOnAnotherThread { property.value = 1 }) }
    }
    #expect(checks.wait(forCount: 3))
    #expect(checks.values == [true, true, true])
    #expect(property.value == 1)
    subscription.cancel()
  }

  @Test(arguments: EventSubjectKind.allCases)
  func noUserCodeRunsUnderALockWhileAnOwnerDeinitializes(_ kind: EventSubjectKind) {
    let subject = kind.make()
    let checks = Recorder<Bool>()
    let entered = Gate()
    let release = Gate()
    var owner: DeinitProbe? = DeinitProbe { checks.append(lockIsFree(in: subject)) }
    subject.observe(with: owner!) { _, _ in
      entered.open()
      release.wait()
    }
    // The handler holds the owner while it runs; the owner's last reference goes when
    // it returns, on the delivering thread.
    let sender = Spawned { subject.send(1) }
    #expect(entered.wait())
    owner = nil
    #expect(checks.count == 0)
    release.open()
    #expect(sender.join())
    #expect(checks.wait(forCount: 1))
    #expect(checks.values == [true])
    #expect(subject.observerCount == 0)
  }

  @Test(arguments: EventSubjectKind.allCases, Ending.allCases)
  func noUserCodeRunsUnderALockWhileCapturesAreReleased(_ kind: EventSubjectKind, _ ending: Ending) {
    let subject = kind.make()
    let checks = Recorder<Bool>()
    let captured = DeinitProbe { checks.append(lockIsFree(in: subject)) }
    var owner: Owner? = Owner()
    var handle: Subscription?
    let box = SubscriptionBox()
    do {
      let capture = captured
      switch ending {
      case .ownerDiesThenSend:
        handle = subject.observe(with: owner!) { _, _ in _ = capture }
      default:
        handle = subject.observe { _ in
          _ = capture
          if ending == .cancelInsideHandler { box.cancel() }
        }
      }
    }
    box.subscription = handle
    _ = consume captured
    #expect(checks.count == 0)
    switch ending {
    case .cancel: handle?.cancel()
    case .cancelInsideHandler: subject.send(1)
    case .ownerDiesThenSend:
      owner = nil
      subject.send(1)
    case .handleReleased:
      box.subscription = nil
      handle = nil
    }
    #expect(checks.wait(forCount: 1))
    #expect(checks.values == [true])
    _ = owner
  }

  @Test func noUserCodeRunsUnderALockWhileRemoveAllObserversReleasesCaptures() {
    let source = EventSource<Int>()
    let subject = EventSourceSubject(.direct)
    let checks = Recorder<Bool>()
    do {
      let capture = DeinitProbe { checks.append(lockIsFree(in: subject)) }
      let other = DeinitProbe { checks.append(completesOnAnotherThread { _ = source.observerCount }) }
      subject.source.observe(with: subject.source) { _, _ in _ = capture }
      source.observe(with: source) { _, _ in _ = other }
    }
    subject.source.removeAllObservers()
    source.removeAllObservers()
    #expect(checks.values == [true, true])
  }

  @Test func noUserCodeRunsUnderALockWhileAOnceHandlerIsReleased() {
    let source = EventSource<Int>()
    let checks = Recorder<Bool>()
    let owner = Owner()
    do {
      let capture = DeinitProbe { checks.append(completesOnAnotherThread { _ = source.observerCount }) }
      source.observeOnce(with: owner) { _, _ in _ = capture }
    }
    source.send(1)
    #expect(checks.values == [true])
    #expect(source.observerCount == 0)
  }

  @Test func noUserCodeRunsUnderALockWhileOldValuesAreReleased() {
    let checks = Recorder<Bool>()
    let holder = SubscriptionBox()
    let property = Property<DeinitProbe>(DeinitProbe {})
    func probe() -> DeinitProbe {
      DeinitProbe { checks.append(completesOnAnotherThread { _ = property.observerCount }) }
    }
    // Without subscribers, then with one.
    property.value = probe()
    property.value = probe()
    #expect(checks.values == [true])
    holder.subscription = property.observe { _ in }
    property.value = probe()
    #expect(checks.values == [true, true])
    property.modify { $0 = DeinitProbe {} }
    #expect(checks.values == [true, true, true])
    holder.cancel()
  }

  @Test func noUserCodeRunsUnderALockWhileSkippedDuplicatesAreReleased() {
    final class Token: Equatable, Sendable {
      let onDeinit: @Sendable () -> Void
      init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
      deinit { onDeinit() }
      static func == (lhs: Token, rhs: Token) -> Bool { true }
    }
    let checks = Recorder<Bool>()
    let property = Property(Token {})
    let subscription = property.observe { _ in }
    property.value = Token { checks.append(completesOnAnotherThread { _ = property.value }) }
    #expect(checks.values == [true])
    #expect(property.observerCount == 1)
    subscription.cancel()
  }

  @Test func noUserCodeRunsUnderALockWhenAnAbortedMutationIsReleased() {
    struct Abort: Error {}
    let checks = Recorder<Bool>()
    let property = Property<DeinitProbe>(DeinitProbe {})
    func probe() -> DeinitProbe {
      DeinitProbe { checks.append(completesOnAnotherThread { _ = property.observerCount }) }
    }
    // A mutation in place through `value` that throws: its access is aborted.
    #expect(throws: Abort.self) {
      try mutateThrowing(&property.value) { value in
        value = probe()
        throw Abort()
      }
    }
    #expect(checks.values == [true])
    // A `modify` whose closure throws.
    #expect(throws: Abort.self) {
      try property.modify { (value: inout DeinitProbe) throws(Abort) in
        value = probe()
        throw Abort()
      }
    }
    #expect(checks.values == [true, true])
  }
}

/// Runs `body` on `value` as one inout access, which a throw aborts.
private func mutateThrowing<Value>(_ value: inout Value, _ body: (inout Value) throws -> Void) rethrows {
  try body(&value)
}
