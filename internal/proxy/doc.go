// Package proxy is svcnet's node agent core: it follows the model, keeps the
// per-node service table up to date one Service at a time, and drives the data
// plane, conntrack cleanup, health check servers and metrics from it.
//
// The sync loop coalesces changes: a sync runs at most once per MinSyncPeriod;
// a full sync (the kernel read back and compared whole) runs at start, every
// SyncPeriod, after any failure, and as soon as the nftables generation shows
// that someone else changed the ruleset.
package proxy
