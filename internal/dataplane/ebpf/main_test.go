package ebpf

import (
	"os"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
)

func TestMain(m *testing.M) {
	cgrouptest.RunClientIfAsked()
	os.Exit(m.Run())
}
