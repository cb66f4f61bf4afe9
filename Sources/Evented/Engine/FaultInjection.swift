// Planted bugs for proving that the stress suite and the tests can fail. None of this is
// in a default build: it exists only with the package trait `FaultInjection`
// (`swift build --traits FaultInjection`), which the planted-bug tests and stress runs
// turn on. Nothing here is API even then: it is reachable only through
// `@_spi(FaultInjection) import Evented`.

#if FaultInjection
  import Synchronization

  /// Switches that plant one known bug at a time, for testing the tests.
  ///
  /// ```swift
  /// @_spi(FaultInjection) import Evented
  /// FaultInjection.planted = .cancelDoesNotWait
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The switch is an atomic; set it from any thread.
  /// - **Ordering:** Code already running may see the change late; set it before the
  ///   work it should affect starts.
  /// - **Reentrancy:** Not applicable.
  /// - **Lifetime:** Process-wide: it affects every source in the process.
  @_spi(FaultInjection)
  public enum FaultInjection {
    /// A bug that can be planted.
    ///
    /// ## Concurrency
    ///
    /// - **Thread safety:** A value type; `Sendable`.
    /// - **Ordering:** Not applicable.
    /// - **Reentrancy:** Not applicable.
    /// - **Lifetime:** Not applicable.
    public enum Bug: UInt8, Sendable, CaseIterable {
      /// Deliveries queued behind a running delivery pass are taken newest first,
      /// breaking commit order.
      case deliverOutOfOrder = 1
      /// Sweeps keep subscriptions whose owner is gone, so they are never purged.
      case keepDeadOwners = 2
      /// `cancel()` returns without waiting for a handler running on another thread.
      case cancelDoesNotWait = 3
      /// A source forgets an ended subscription whose handler still runs, so that
      /// `removeAllObservers()` does not wait for it.
      case forgetRunningEndedSubscriptions = 4
      /// A derived value of several roots computes from the value its notifying root
      /// delivered, not from the latest committed state of all its roots: it can
      /// pair a stale value of one root with a newer value of another.
      case derivedUsesDeliveredValue = 5
      /// A transaction's writes are visible to other threads' derived values as soon
      /// as each is made, not all at once when the transaction ends.
      case transactionSeenInPart = 6
      /// An actor variant's handler task reads its thread's ID before a handler's
      /// `await` and locks with it after, when the task may run on another thread.
      case threadIDAcrossAwait = 7
      /// An observed derived value delivers every state it computes, also one that is
      /// not later than the state it delivered last: a state computed late, or twice.
      case derivedDeliversStaleState = 8
      /// A transaction that throws leaves its writes in place instead of restoring the
      /// state from before it: other threads then see what it rolled back.
      case rolledBackWriteLeftVisible = 9
    }

    /// The bug planted now, if any.
    public static var planted: Bug? {
      get { Bug(rawValue: plantedBug.load(ordering: .relaxed)) }
      set { plantedBug.store(newValue?.rawValue ?? 0, ordering: .relaxed) }
    }

    @usableFromInline static func isPlanted(_ bug: Bug) -> Bool {
      plantedBug.load(ordering: .relaxed) == bug.rawValue
    }
  }

  private let plantedBug = Atomic<UInt8>(0)

  /// The engine's checks for each bug: internal, since inlinable code cannot use SPI.
  @usableFromInline
  enum Planted {
    @usableFromInline static var deliverOutOfOrder: Bool { FaultInjection.isPlanted(.deliverOutOfOrder) }
    @usableFromInline static var keepDeadOwners: Bool { FaultInjection.isPlanted(.keepDeadOwners) }
    @usableFromInline static var cancelDoesNotWait: Bool { FaultInjection.isPlanted(.cancelDoesNotWait) }
    @usableFromInline static var forgetRunningEndedSubscriptions: Bool {
      FaultInjection.isPlanted(.forgetRunningEndedSubscriptions)
    }
    @usableFromInline static var derivedUsesDeliveredValue: Bool {
      FaultInjection.isPlanted(.derivedUsesDeliveredValue)
    }
    @usableFromInline static var transactionSeenInPart: Bool { FaultInjection.isPlanted(.transactionSeenInPart) }
    @usableFromInline static var threadIDAcrossAwait: Bool { FaultInjection.isPlanted(.threadIDAcrossAwait) }
    @usableFromInline static var derivedDeliversStaleState: Bool {
      FaultInjection.isPlanted(.derivedDeliversStaleState)
    }
    @usableFromInline static var rolledBackWriteLeftVisible: Bool {
      FaultInjection.isPlanted(.rolledBackWriteLeftVisible)
    }
  }

  /// The thread ID that every lock of a task claims while the planted
  /// `threadIDAcrossAwait` is on: the thread its drain loop started on, read once, as
  /// an optimizer that takes `pthread_self` for `const` may do in an `async` function.
  @usableFromInline
  enum StaleThread {
    @TaskLocal @usableFromInline static var id: UInt?
  }
#endif
