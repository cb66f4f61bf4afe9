// Observation: `Property` and `ReadOnlyProperty` join `withObservationTracking`,
// `Observations` and SwiftUI. Reading `value` inside a tracking scope registers the
// access; each commit that changes the value notifies the scope once, after the commit
// and outside every lock (see ObservationSite.swift).

import Observation

extension Property: Observable {}

extension ReadOnlyProperty: Observable {}
