package socklb

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(envClient) != "" {
		os.Exit(runClient(os.Args[1:]))
	}
	os.Exit(m.Run())
}
