package cluster

import (
	"fmt"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/lb/members"
)

// WriteHeartbeatKey writes a new random key to the lab's key file, readable by
// root only: whoever holds it can move the lab's LoadBalancer IPs.
func WriteHeartbeatKey(n topology.Names) error {
	key, err := members.GenerateKey()
	if err != nil {
		return fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	if err := atomicfile.Write(n.HeartbeatKey(), []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("lab %s: heartbeat key: %w", n.Lab, err)
	}
	return nil
}
