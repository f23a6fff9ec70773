// Package kube feeds a model.Store from a real Kubernetes API server through
// client-go shared informers on Services, EndpointSlices and Nodes (and Pods when
// asked).
//
// Contract:
//   - Objects are converted only by the model package (ServiceFromAPI,
//     EndpointSliceFromAPI, NodeFromAPI, PodFromAPI). An object that fails to
//     convert is logged (namespace/name and reason) and left out; a version of it
//     that converted earlier is deleted from the store, so the store never holds a
//     state the API no longer has. Slices the model does not represent (address
//     type FQDN, no kubernetes.io/service-name label) are left out the same way.
//     One bad object never blocks the others.
//   - Events are coalesced per object and applied in batches, one Store.Update per
//     batch: the store moves from one API state to a later one, never backwards,
//     and the initial list lands as a single snapshot with Synced set.
//   - Writes are idempotent (the store has set semantics), so informer relists
//     after an apiserver restart or watch expiry neither lose nor duplicate state.
//   - Nothing runs before Run; Run stops every goroutine it started before it
//     returns.
package kube
