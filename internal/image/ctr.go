package image

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// CRINamespace is the containerd namespace the CRI plugin (and so the
// kubelet) uses; images imported elsewhere are invisible to Pods.
const CRINamespace = "k8s.io"

// Import loads each archive into the containerd whose socket is address, in
// CRINamespace, with the ctr program at ctr (`ctr images import`). The images
// keep the references they are tagged with, so Pods naming them with
// imagePullPolicy IfNotPresent (or Never) start without a registry.
func Import(ctx context.Context, ctr, address string, archives ...string) error {
	for _, a := range archives {
		cmd := exec.CommandContext(ctx, ctr, "--address", address, "--namespace", CRINamespace, "images", "import", a)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: import %s into %s: %w\n%s", ctr, a, address, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
