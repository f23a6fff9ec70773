// Package proxy is svcnet's node agent core: it follows the model, keeps the
// per-node service table up to date one Service at a time, and drives the data
// plane, conntrack cleanup, health check servers and metrics from it.
//
// The sync loop coalesces changes: a sync runs at most once per MinSyncPeriod,
// and at least once per SyncPeriod (re-resolving node addresses). A full sync
// (the tables read back from the kernel and compared whole) runs at start,
// after any failure, every FullSyncPeriod, and as soon as the nftables
// generation shows that someone else committed to the ruleset, rate-limited
// so that verification takes at most a tenth of the time.
package proxy
