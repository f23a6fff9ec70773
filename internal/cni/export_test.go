package cni

import "testing"

// SetDefaultDataDir makes dir the parent of the IPAM stores of networks
// without dataDir until the test ends.
func SetDefaultDataDir(t *testing.T, dir string) {
	old := defaultDataDir
	defaultDataDir = dir
	t.Cleanup(func() { defaultDataDir = old })
}
