package topology

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
)

// The lab calls svcnet's CNI plugin as a container runtime does: through libcni,
// from inside the node's namespace, with the plugin found by its type ("svcnet")
// in a CNI_PATH directory that links to the svcnet binary, and a conflist per node.

const cniNetwork = "svcnet"

func (n Names) cniBinDir() string             { return n.Path("cni", "bin") }
func (n Names) cniNodeDir(node string) string { return n.Path("cni", node) }

// InstallCNI links the svcnet binary into the lab's CNI_PATH and writes each
// node's conflist (its pod CIDRs of the stack's families, an IPAM store of its own).
func InstallCNI(n Names, s Stack, binary string, nodes int) error {
	if err := os.MkdirAll(n.cniBinDir(), 0o755); err != nil {
		return err
	}
	link := filepath.Join(n.cniBinDir(), "svcnet")
	_ = os.Remove(link)
	if err := os.Symlink(binary, link); err != nil {
		return fmt.Errorf("install CNI plugin: %w", err)
	}
	for i := 1; i <= nodes; i++ {
		dir := n.cniNodeDir(NodeName(i))
		b, err := Conflist(s.PodCIDRs(i), filepath.Join(dir, "ipam"))
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, cniNetwork+".conflist"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Conflist is a node's CNI network configuration list for svcnet's plugin
// (network "svcnet", bridge cni0, the lab's MTU, the portMappings
// capability, cniVersion 1.1.0): its pod CIDRs and IPAM store (dataDir; ""
// leaves the plugin's default, /var/lib/cni/networks/svcnet). It is
// cni.ConfList's rendering.
func Conflist(subnets []netip.Prefix, dataDir string) ([]byte, error) {
	return cni.ConfList(cni.ListOptions{
		CNIVersion: "1.1.0", Name: cniNetwork, Bridge: "cni0", MTU: mtu,
		Subnets: subnets, DataDir: dataDir,
	})
}

// cniRuntime invokes the plugin for the pods of one node.
type cniRuntime struct {
	names Names
	node  string
	ns    *netns.NS // the node's namespace
}

func (r cniRuntime) config() (*libcni.CNIConfig, *libcni.NetworkConfigList, error) {
	dir := r.names.cniNodeDir(r.node)
	list, err := libcni.ConfListFromFile(filepath.Join(dir, cniNetwork+".conflist"))
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: CNI config: %w", r.node, err)
	}
	return libcni.NewCNIConfigWithCacheDir([]string{r.names.cniBinDir()}, filepath.Join(dir, "cache"), nil), list, nil
}

// containerID is the sandbox id the lab gives a pod: stable for its namespace and
// name, as a runtime's id is stable for one sandbox.
func containerID(namespace, name string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(h[:16])
}

func (r cniRuntime) runtimeConf(pod *corev1.Pod, podNS string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: containerID(pod.Namespace, pod.Name),
		NetNS:       filepath.Join(netns.RunDir, podNS),
		IfName:      "eth0",
		Args: [][2]string{
			{"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID(pod.Namespace, pod.Name)},
		},
	}
	if pm := portMappings(pod); len(pm) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": pm}
	}
	return rt
}

// portMappings are the Pod's hostPorts, as the kubelet passes them.
func portMappings(pod *corev1.Pod) []map[string]any {
	var out []map[string]any
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			m := map[string]any{"hostPort": p.HostPort, "containerPort": p.ContainerPort, "protocol": proto}
			if p.HostIP != "" {
				m["hostIP"] = p.HostIP
			}
			out = append(out, m)
		}
	}
	return out
}

// add wires the pod and returns its addresses.
func (r cniRuntime) add(ctx context.Context, pod *corev1.Pod, podNS string) ([]netip.Addr, error) {
	cfg, list, err := r.config()
	if err != nil {
		return nil, err
	}
	var res *types100.Result
	err = r.ns.Do(func() error {
		out, err := cfg.AddNetworkList(ctx, list, r.runtimeConf(pod, podNS))
		if err != nil {
			return err
		}
		res, err = types100.NewResultFromResult(out)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: CNI ADD on %s: %w", pod.Namespace, pod.Name, r.node, err)
	}
	var ips []netip.Addr
	for _, ip := range res.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			ips = append(ips, a.Unmap())
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("pod %s/%s: CNI ADD on %s returned no address", pod.Namespace, pod.Name, r.node)
	}
	return ips, nil
}

// del unwires the pod; it succeeds when there is nothing left to remove.
func (r cniRuntime) del(ctx context.Context, pod *corev1.Pod, podNS string) error {
	cfg, list, err := r.config()
	if err != nil {
		return err
	}
	err = r.ns.Do(func() error { return cfg.DelNetworkList(ctx, list, r.runtimeConf(pod, podNS)) })
	if err != nil {
		return fmt.Errorf("pod %s/%s: CNI DEL on %s: %w", pod.Namespace, pod.Name, r.node, err)
	}
	return nil
}
