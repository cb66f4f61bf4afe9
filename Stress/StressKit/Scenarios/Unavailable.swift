// Scenarios whose APIs are not in this build yet. They are listed so that a run says
// plainly what it did not check.

let actorsAndArrays = Scenario(
  name: "actors-and-arrays",
  summary: "the actor variants keep the same invariants; ArrayProperty changesets reproduce the array",
  unavailable: "not available yet (needs ActorEventSource, ActorProperty and ArrayProperty)"
) { _ in }
