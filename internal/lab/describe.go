package lab

import (
	"context"
	"fmt"
	"io"

	"github.com/svcnet/svcnet/internal/describe"
)

// Describe writes what kubectl describe writes for args (describe.Run),
// events included: read from the kube control plane's API server, or from
// what the embedded control plane holds and the events it recorded.
func (l *Lab) Describe(ctx context.Context, out, errOut io.Writer, args []string, o describe.Options) error {
	r, err := l.c.CP.Reader(ctx)
	if err != nil {
		return fmt.Errorf("lab %s: %w", l.c.Names.Lab, err)
	}
	return describe.Run(ctx, out, errOut, r, args, o)
}
