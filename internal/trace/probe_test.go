package trace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// TestIsTimeout: a dial that ends by the socket's deadline ("i/o timeout") is
// a timeout even while the context's own timer has not yet marked it done,
// which is the race that once made --verify report a dropped probe as failed.
func TestIsTimeout(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-done.Done()
	ioTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"poller deadline, context still live", live, ioTimeout, true},
		{"wrapped deadline", live, fmt.Errorf("probe: %w", os.ErrDeadlineExceeded), true},
		{"context done", done, errors.New("whatever"), true},
		{"another error", live, errors.New("connection reset by peer"), false},
	} {
		if got := isTimeout(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: isTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
}
