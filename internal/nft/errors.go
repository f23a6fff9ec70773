package nft

import (
	"errors"
	"fmt"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// OpError is the error of a transaction refused at one of its operations:
// Ops[Op] of the Tx on table Family Table. Conn implementations return it
// (wrapped) when they know which operation failed, so that a caller that built
// the transaction can tell what the kernel refused (Probe names the feature).
type OpError struct {
	Family ipfamily.Family
	Table  string
	Op     int
	// Detail describes the operation ("add rule to services"); may be empty.
	Detail string
	Err    error
}

// Error reads "table ip t: op 3 (add rule to c): reason".
func (e *OpError) Error() string {
	d := ""
	if e.Detail != "" {
		d = " (" + e.Detail + ")"
	}
	return fmt.Sprintf("table %s %s: op %d%s: %v", Keyword(e.Family), e.Table, e.Op, d, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// ErrNotSupported is wrapped by the error of Probe when the kernel refuses an
// expression, chain type or set kind svcnet needs: the kernel lacks the
// feature (a module not built or not loadable, a kernel too old).
var ErrNotSupported = errors.New("nftables feature not supported")
