// The effect's links as a state machine: requests numbered so that a later state's
// links win, one applier at a time, and nothing kept once the effect stops following.
// Every transition checks the invariants (debug builds).

import Testing

@testable import Evented

@Suite struct EffectStateTests {
  let properties = (0..<3).map { Property($0) }

  func reads(_ roots: [Int]) -> Reads {
    let chosen = roots.map { properties[$0].root as any Root }
    return Reads(roots: chosen, identities: chosen.map(\.identity), versions: roots.map { _ in 0 })
  }

  /// Links made for `roots`, as the applier makes them (subscriptions nobody delivers to).
  func links(_ roots: [any Root]) -> [EffectState.Link] {
    roots.map { EffectState.Link(identity: $0.identity, root: $0, core: SubscriptionCore(isOnce: false, target: nil)) }
  }

  @Test func anUnlinkedEffectTakesNoRequest() {
    var state = EffectState()
    let mustApply = state.request(reads([0]), number: 1)
    #expect(!mustApply)
    let step = state.nextStep()
    #expect(step == nil)
  }

  @Test func theApplierLinksTheNewestRequestAndEndsWhatItNoLongerReads() throws {
    var state = EffectState()
    let leftOver = state.link()
    #expect(leftOver.isEmpty)
    let mustApply = state.request(reads([0, 1]), number: 2)
    let older = state.request(reads([0, 2]), number: 1)
    #expect(mustApply && !older, "an older request is dropped")
    let firstStep = state.nextStep()
    let first = try #require(firstStep)
    #expect(first.added.map(\.identity) == reads([0, 1]).identities)
    let refused = state.attach(links(first.added))
    let none = state.nextStep()
    #expect(refused.isEmpty && none == nil && !state.isRelinking)
    // A switch: root 1 is no longer read, root 2 is.
    let switching = state.request(reads([0, 2]), number: 4)
    let meanwhile = state.request(reads([0, 2]), number: 4)
    #expect(switching && !meanwhile, "the applier is at work")
    let secondStep = state.nextStep()
    let second = try #require(secondStep)
    #expect(second.ended.count == 1)
    #expect(second.added.map(\.identity) == [properties[2].root.identity])
    let kept = state.attach(links(second.added))
    #expect(kept.isEmpty)
    #expect(state.linkedRoots.map(\.identity) == reads([0, 2]).identities)
    let last = state.nextStep()
    #expect(last == nil)
  }

  @Test func linksMadeAfterTheEffectStoppedFollowingAreReturnedToEnd() throws {
    var state = EffectState()
    _ = state.link()
    let mustApply = state.request(reads([0]), number: 2)
    #expect(mustApply)
    let stepStep = state.nextStep()
    let step = try #require(stepStep)
    let ended = state.unlink()
    #expect(ended.isEmpty)
    let returned = state.attach(links(step.added))
    #expect(returned.count == 1)
    let none = state.nextStep()
    #expect(none == nil && state.linkedRoots.isEmpty)
  }

  @Test func aSwitchWhoseLinksAnotherThreadAppliesTakesOutTheLinksItNoLongerReads() throws {
    var state = EffectState()
    _ = state.link()
    let applies = state.request(reads([0, 1]), number: 2)
    let firstStep = state.nextStep()
    let first = try #require(firstStep)
    _ = state.attach(links(first.added))
    // The applier goes on to a switch from root 1 to root 2 and ends root 1's link...
    let switching = state.request(reads([0, 2]), number: 4)
    let secondStep = state.nextStep()
    let second = try #require(secondStep)
    #expect(applies && !switching && second.ended.count == 1)
    // ...while another thread's newer state reads root 2 alone.
    let queued = state.request(reads([2]), number: 5)
    #expect(!queued)
    let unread = state.takeUnread(reads([2]))
    #expect(unread.count == 1, "root 1's, which the applier is ending; the step being applied names root 0")
    #expect(state.linkedRoots.map(\.identity) == [properties[0].root.identity])
    _ = state.attach(links(second.added))
    let thirdStep = state.nextStep()
    let third = try #require(thirdStep)
    #expect(third.ended.count == 1 && third.added.isEmpty, "root 0 ends; root 2 is linked already")
    let none = state.nextStep()
    #expect(none == nil)
    #expect(state.linkedRoots.map(\.identity) == [properties[2].root.identity])
  }

  @Test func aSwitchKeepsTheLinksTheWaitingRequestNamesAndTakesNothingWhenNobodyApplies() throws {
    var state = EffectState()
    _ = state.link()
    let applies = state.request(reads([0]), number: 2)
    let firstStep = state.nextStep()
    let first = try #require(firstStep)
    _ = state.attach(links(first.added))
    let newer = state.request(reads([0]), number: 6)
    let older = state.request(reads([1]), number: 5)
    let stale = state.takeUnread(reads([1]))
    #expect(applies && !newer && !older && stale.isEmpty, "the waiting request keeps root 0")
    _ = state.nextStep()
    let none = state.nextStep()
    let idle = state.takeUnread(reads([1]))
    #expect(none == nil && idle.isEmpty, "nobody applies")
    #expect(state.linkedRoots.count == 1)
  }

  @Test func aDroppedEffectLinksAfreshWhenObservedAgain() throws {
    var state = EffectState()
    _ = state.link()
    let mustApply = state.request(reads([0]), number: 2)
    #expect(mustApply)
    let stepStep = state.nextStep()
    let step = try #require(stepStep)
    let refused = state.attach(links(step.added))
    let none = state.nextStep()
    #expect(refused.isEmpty && none == nil)
    state.dropped()
    #expect(!state.isLinked)
    let leftOver = state.link()
    #expect(leftOver.count == 1, "the dropped link is ended")
    let again = state.request(reads([0]), number: 0)
    #expect(again, "numbers start again")
    let relinked = state.nextStep()
    #expect(relinked?.added.count == 1)
  }
}

extension EffectState.Step: Equatable {
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.reads.identities == rhs.reads.identities && lhs.ended.count == rhs.ended.count
      && lhs.added.map(\.identity) == rhs.added.map(\.identity)
  }
}
