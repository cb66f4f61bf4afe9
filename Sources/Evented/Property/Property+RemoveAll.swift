// `removeAllObservers()` on the writable property only: a `ReadOnlyProperty` is handed
// out so that others can observe, and must not be able to end their subscriptions.

extension Property {
  /// Ends every subscription users made on this property, including those made through
  /// its read-only views (``readOnly``, `$name`).
  ///
  /// ```swift
  /// model.name.removeAllObservers()
  /// model.name.observerCount   // 0
  /// ```
  ///
  /// When this returns, no handler of this property will start again. A handler that
  /// is running on another thread is waited for, as with ``Subscription/cancel()``;
  /// this holds when several threads call it at once, too: each call also ends, and
  /// waits for, the subscriptions that another call removed and is still ending.
  /// Values derived from this property (`map`, `combineLatest`, `flatMapLatest`) keep
  /// following it, and their observers keep receiving their updates: this ends the
  /// subscriptions users made on this property, not the links of what is built on it.
  /// So ``observerCount`` is 0 afterwards unless a derived value built on this property
  /// is observed (it counts that value's link).
  ///
  /// ``ReadOnlyProperty`` has no such member: a view lets others observe, and must not
  /// let them end each other's subscriptions.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread, and from inside a handler.
  /// - **Ordering:** No write committed after this returns reaches an ended
  ///   subscription.
  /// - **Reentrancy:** Called from inside a handler of this property, it returns at
  ///   once for that handler's own subscription, which ends when the handler returns.
  /// - **Lifetime:** Each ended handler and its captures are released once it is not
  ///   running.
  ///
  /// - Important: A handler whose subscription has already ended (it cancelled itself,
  ///   or it is a once-only handler) is still waited for while it runs. As with
  ///   `cancel()`, a handler that waits for the thread calling this (a lock it holds, a
  ///   semaphore it would signal) deadlocks.
  public func removeAllObservers() {
    hub.removeAll()
  }
}
