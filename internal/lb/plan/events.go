package plan

import "strings"

// Event reasons svcnet lb records on Services; the embedded control plane,
// which allocates in its place, records the same.
const (
	ReasonIPAllocated      = "IPAllocated"
	ReasonAllocationFailed = "AllocationFailed"
	ReasonIPReleased       = "IPReleased"
)

// Event reasons on an IPAddressPool.
const (
	// ReasonPoolAccepted (Normal): the pool serves.
	ReasonPoolAccepted = "PoolAccepted"
	// ReasonPoolRefused (Warning): the pool was left out; the message says why.
	ReasonPoolRefused = "PoolRefused"
	// ReasonPoolReservedAddresses (Warning): an admitted pool holds addresses
	// that became the cluster's own; they are no longer handed out.
	ReasonPoolReservedAddresses = "ReservedAddresses"
)

// AllocatedMessage is an IPAllocated event's message: the addresses, and
// the pool they came from when there is one.
func AllocatedMessage(ips []string, pool string) string {
	if pool == "" {
		return "Assigned IP " + strings.Join(ips, ",")
	}
	return "Assigned IP " + strings.Join(ips, ",") + " from pool " + pool
}

// ReleasedMessage is an IPReleased event's message.
func ReleasedMessage(ips []string) string { return "Released IP " + strings.Join(ips, ",") }
