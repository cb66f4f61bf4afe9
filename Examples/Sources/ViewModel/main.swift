// A view model bound to a fake main-actor view with owners. Background code writes the
// model; the view's handlers run on the main actor; dropping the view ends its
// subscriptions, with no `cancel()` and no `[weak self]`.
//
// Run: swift run --package-path Examples view-model

import Evented

/// The model: shared with background work, so its properties are `let`s.
final class ProfileViewModel: Sendable {
  let name = Property("")
  let followers = Property(0)
  let didFail = EventSource<String>()
  /// Derived: stays current when either source changes.
  let title: ReadOnlyProperty<String>

  init() {
    title = name.combineLatest(followers).map { name, followers in
      name.isEmpty ? "Loading…" : "\(name), \(followers) followers"
    }
  }

  /// Loads from "the network": writes from a background task.
  func load() async {
    await Task.detached {
      self.name.value = "Ada"
      self.followers.value = 42
      self.followers.modify { $0 += 1 }
      self.didFail.send("avatar unavailable")
    }.value
  }
}

/// A fake view: on a device this would be a `UIView` or a view controller. A main-actor
/// class is `Sendable`, so it can be an owner.
@MainActor final class ProfileView {
  let id: String
  private(set) var titleText = ""
  private(set) var banner: String?

  init(id: String) { self.id = id }

  func bind(to viewModel: ProfileViewModel) {
    // The view is the owner: held weakly, passed to the handler, and the subscription
    // ends when the view deinitializes. `on: .main` makes the handlers `@MainActor`.
    viewModel.title.observe(with: self, on: .main) { view, title in
      view.titleText = title
      print("  [\(view.id)] title: \(title)")
    }
    viewModel.didFail.observe(with: self, on: .main) { view, message in
      view.banner = message
      print("  [\(view.id)] banner: \(message)")
    }
  }

  deinit { print("  [\(id)] view deinitialized") }
}

/// Lets the main queue run the handlers delivered `on: .main` (top-level code is on the
/// main actor; awaiting frees it).
func settle() async {
  try? await Task.sleep(for: .milliseconds(100))
}

let viewModel = ProfileViewModel()
var view: ProfileView? = ProfileView(id: "profile")

print("bind the view")
view?.bind(to: viewModel)
await settle()
print("observers: title \(viewModel.title.observerCount), didFail \(viewModel.didFail.observerCount)")

print("load in the background")
await viewModel.load()
await settle()

print("drop the view")
view = nil
viewModel.name.value = "Grace"  // nobody is bound any more: nothing prints
viewModel.didFail.send("offline")
await settle()
let left = viewModel.title.observerCount + viewModel.didFail.observerCount
print("observers after the view is gone: \(left)")
precondition(left == 0, "a subscription outlived its view")
