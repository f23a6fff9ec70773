package testbin

import "os"

// EnvDataPlane names the Service data plane the proxy tiers run svcnet proxy
// on (its --data-plane value): `SVCNET_DATA_PLANE=nftables go test
// ./test/proxy ./test/e2e` runs the behaviour suites on that plane. Unset,
// they run on svcnet proxy's default.
const EnvDataPlane = "SVCNET_DATA_PLANE"

// DataPlane returns $SVCNET_DATA_PLANE ("" when unset: the default plane).
func DataPlane() string { return os.Getenv(EnvDataPlane) }

// DataPlaneArgs returns the svcnet proxy flags that select DataPlane(): none
// when it is unset.
func DataPlaneArgs() []string {
	if p := DataPlane(); p != "" {
		return []string{"--data-plane", p}
	}
	return nil
}
