// Observation: reading `value`, `count`, `isEmpty` or an element inside a tracking scope
// registers the access; the next changeset notifies the scope once. The array follows
// its own changes with one subscription while a scope waits (see ObservationSite.swift),
// so that none of its mutation paths pays anything when nobody tracks it.

import Observation

extension ArrayProperty: Observable {
  /// Registers a read with the tracking scope of the calling thread, if any.
  @inlinable @inline(__always)
  func registerAccess() {
    observation.access { site in
      hub.observe(.handle, reading: .message, on: nil, outlivesRemoveAll: true, { _ in site.changed() })
    }
  }
}
