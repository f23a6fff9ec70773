// Package healthcheck serves the proxy's HTTP health endpoints with kube-proxy
// v1.36's semantics (pkg/proxy/healthcheck):
//
//   - ProxyHealthServer answers /healthz and /livez on --healthz-bind-address
//     (default 0.0.0.0:10256). The proxy is healthy unless some IP family has
//     had an update queued (QueuedUpdate) for at least the health timeout
//     (2 × --sync-period) without a completed sync (Updated) since. /healthz
//     is additionally unhealthy when the node is not eligible (being deleted,
//     or tainted ToBeDeletedByClusterAutoscaler).
//   - ServiceHealthServer runs one HTTP server per Service with a
//     healthCheckNodePort (externalTrafficPolicy: Local), answering 200 when
//     the node has local endpoints for it and the proxy is healthy, else 503,
//     so external load balancers send traffic only to nodes that can serve it.
//
// Nothing here starts a goroutine from a constructor: listeners are served
// only inside Run(ctx), and every server stops when that context ends. Socket
// creation goes through the Listener interface so tests can use loopback
// ports. The package knows nothing of the data plane; the proxy wires it.
package healthcheck
