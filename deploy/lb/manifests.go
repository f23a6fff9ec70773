// Package lb holds svcnet lb's deployment manifests, and embeds the ones svcnet
// itself installs: the IPAddressPool CustomResourceDefinition, which the lab's
// kube control plane needs before its default pool can be created.
package lb

import _ "embed"

// CRD is crd.yaml: the CustomResourceDefinition ipaddresspools.svcnet.io.
//
//go:embed crd.yaml
var CRD []byte
