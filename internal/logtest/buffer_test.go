package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent: writers and a reader at once (go test -race checks
// the locking); every write is kept whole.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
			}
		}()
	}
	for i := 0; i < 100; i++ {
		_ = b.String()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for w := 0; w < 4; w++ {
		for i := 0; i < 100; i++ {
			if !strings.Contains(b.String(), fmt.Sprintf("w%d-%d\n", w, i)) {
				t.Fatalf("line w%d-%d missing or split", w, i)
			}
		}
	}
}
