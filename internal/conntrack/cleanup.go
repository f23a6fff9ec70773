package conntrack

import (
	"context"
	"errors"
	"fmt"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"k8s.io/klog/v2"
)

// Table is the kernel boundary: one network namespace's conntrack table.
type Table interface {
	// List returns every flow of family fam, in no particular order. If the
	// error wraps ErrPartial the flows are real but some may be missing (the
	// table changed too often during the dump); any other error returns no
	// flows.
	List(fam ipfamily.Family) ([]Flow, error)
	// Delete deletes the given flows of family fam (as returned by List) and
	// returns how many it deleted. A flow that is already gone, or that was
	// replaced by a new entry with the same tuple (different ID), is skipped
	// without error. On error, the count is still that of deleted flows.
	Delete(fam ipfamily.Family, flows []Flow) (int, error)
}

// ErrPartial marks a List result that may be incomplete.
var ErrPartial = errors.New("conntrack dump interrupted, result may be incomplete")

// deleteBatch bounds how many flows one Delete call gets, so that Cleanup
// notices a cancelled context between batches.
const deleteBatch = 256

// Cleanup deletes the stale flows (see Stale) from t and returns how many it
// deleted. It lists each family that has serving endpoints in want once and
// deletes exactly the stale flows listed; families without endpoints are not
// even listed. A partial list is used as far as it goes (the next sync picks
// up the rest). An error in one family does not stop the other; errors are
// joined. A cancelled ctx stops Cleanup between steps, returning ctx.Err().
//
// Logs go to klog.FromContext(ctx): V(4) per family, V(5) per deleted flow.
func Cleanup(ctx context.Context, t Table, want Want) (deleted int, err error) {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, fam := range want.families() {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		flows, err := t.List(fam)
		switch {
		case errors.Is(err, ErrPartial):
			logger.V(2).Info("Conntrack list incomplete, cleaning what was listed", "family", fam, "flows", len(flows), "err", err)
		case err != nil:
			errs = append(errs, fmt.Errorf("list %s conntrack flows: %w", fam, err))
			continue
		}
		var stale []Flow
		for _, f := range flows {
			if Stale(f, want) {
				stale = append(stale, f)
				if v := logger.V(5); v.Enabled() {
					v.Info("Deleting stale conntrack flow", "flow", f.String())
				}
			}
		}
		n, err := deleteBatches(ctx, t, fam, stale)
		deleted += n
		logger.V(4).Info("Cleaned stale conntrack flows", "family", fam, "listed", len(flows), "stale", len(stale), "deleted", n)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return deleted, err
			}
			errs = append(errs, fmt.Errorf("delete %s conntrack flows: %w", fam, err))
		}
	}
	return deleted, errors.Join(errs...)
}

func deleteBatches(ctx context.Context, t Table, fam ipfamily.Family, flows []Flow) (int, error) {
	var errs []error
	total := 0
	for start := 0; start < len(flows); start += deleteBatch {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := t.Delete(fam, flows[start:min(start+deleteBatch, len(flows))])
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}
