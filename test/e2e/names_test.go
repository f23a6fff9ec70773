package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// hostileName is one name (and namespace) no lab verb may turn into a path.
type hostileName struct {
	desc, namespace, name string
	want                  string // in the error, beside the user's file name
}

// hostileNames aims at the files of victimDir through the lab's objects/
// directory: with names joined into paths unvalidated, applying a Service
// named `../REL/ESCAPED` wrote victimDir/ESCAPED.yaml and deleting
// `../REL/victim` removed victimDir/victim.yaml.
func hostileNames(objectsDir, victimDir string) []hostileName {
	rel, err := filepath.Rel(objectsDir, victimDir)
	if err != nil {
		panic(err)
	}
	return []hostileName{
		{"dot-dot", "default", "..", "Invalid value"},
		{"dot", "default", ".", "Invalid value"},
		{"escape to /tmp", "default", "../../../../tmp/ESCAPED", "Invalid value"},
		{"escape to the victim dir", "default", "../" + rel + "/ESCAPED", "Invalid value"},
		{"the victim file", "default", "../" + rel + "/victim", "Invalid value"},
		{"slash", "default", "a/b", "Invalid value"},
		{"NUL", "default", "a\x00b", "Invalid value"},
		{"300 characters", "default", strings.Repeat("a", 300), "must be no more than"},
		{"unicode", "default", "под", "Invalid value"},
		{"upper case", "default", "Web", "Invalid value"},
		{"namespace with a dot", "pod.default", "b", "metadata.namespace: Invalid value"},
		{"namespace escaping", "../" + rel, "victim", "metadata.namespace: Invalid value"},
		{"namespace of 64 characters", strings.Repeat("n", 64), "b", "metadata.namespace: Invalid value"},
	}
}

// hostileManifest is one document of each kind `lab apply` takes, all named h.
func hostileManifest(h hostileName) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) } // YAML double-quoted: \x00 stays NUL
	ns, name := q(h.namespace), q(h.name)
	docs := []string{
		fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec: {ports: [{port: 80}]}\n", name, ns),
		fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec: {containers: [{name: c, image: x, ports: [{containerPort: 80}]}]}\n", name, ns),
		fmt.Sprintf("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s, namespace: %s}\naddressType: IPv4\nendpoints: []\n", name, ns),
		fmt.Sprintf("apiVersion: v1\nkind: Endpoints\nmetadata: {name: %s, namespace: %s}\n", name, ns),
	}
	if h.namespace == "default" { // cluster-scoped kinds: the name alone
		docs = append(docs,
			fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", name),
			fmt.Sprintf("apiVersion: svcnet.io/v1alpha1\nkind: IPAddressPool\nmetadata: {name: %s}\nspec: {addresses: [10.99.0.0/30]}\n", name))
	}
	return strings.Join(docs, "---\n")
}

// treeState records every file under root (path, mode, size, content hash)
// and every directory (path, mode).
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = info.Mode().String()
			return nil
		}
		sum := ""
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		out[p] = fmt.Sprintf("%v %d %s", info.Mode(), info.Size(), sum)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// findNamed lists the files and directories under root, at most depth levels
// down, whose name contains part.
func findNamed(root, part string, depth int) []string {
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.Contains(d.Name(), part) {
			found = append(found, p)
		}
		if d.IsDir() && strings.Count(strings.TrimPrefix(p, root), "/") >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

func diffStates(before, after map[string]string) []string {
	var d []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		} else if a != b {
			d = append(d, "changed "+p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, "created "+p)
		}
	}
	slices.Sort(d)
	return d
}

// labNamespaces lists the network namespaces of lab name.
func labNamespaces(t *testing.T, name string) []string {
	t.Helper()
	all, err := netns.Names()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(s string) bool { return !strings.HasPrefix(s, name+".") })
}

// TestHostileNames runs every lab verb that takes a name with hostile names and
// namespaces, as a user would from the command line, on a one-node lab of the
// file control plane (the one that keeps objects as files): each is refused
// with the apiserver's validation error naming the user's file, and no file
// outside the lab's state directory is created, changed or removed. Then two
// valid Pods whose names agree in their first 200 bytes (their namespaces,
// state files and logs are shortened and hashed) both run, are listed and are
// deleted one without the other.
func TestHostileNames(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	name := labtest.Name("names")
	l := labtest.Up(t, ctx, lab.Options{Name: name, Nodes: 1, Binary: svcnetBin, Progress: testWriter{t}}, "")
	l.Close() // the CLI below takes the lab's lock
	names := topology.Names{Lab: name}

	victimDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(victimDir, "victim.yaml"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifests := t.TempDir()
	before := treeState(t, victimDir)
	nsBefore := labNamespaces(t, name)
	svcnet := func(args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		out, err := exec.CommandContext(cctx, svcnetBin, append([]string{"lab", "--name", name}, args...)...).CombinedOutput()
		return string(out), err
	}
	podNames := func() []string {
		out, err := svcnet("get", "pods", "-A")
		if err != nil {
			t.Fatalf("get pods: %v:\n%s", err, out)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] != "NAMESPACE" {
				names = append(names, f[0]+"/"+f[1])
			}
		}
		return names
	}
	podsBefore := podNames()
	refused := func(t *testing.T, h hostileName, out string, err error, args ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("svcnet lab %q: succeeded, want a refusal:\n%s", args, out)
			return
		}
		if !strings.Contains(out, h.want) || strings.Contains(out, "file name too long") || strings.Contains(out, names.Path("objects")) {
			t.Errorf("svcnet lab %q: %v:\n%s\nwant the validation error %q, and no internal path", args, err, out, h.want)
		}
	}
	for i, h := range hostileNames(names.Path("objects"), victimDir) {
		t.Run(h.desc, func(t *testing.T) {
			file := filepath.Join(manifests, fmt.Sprintf("hostile-%d.yaml", i))
			doc := hostileManifest(h)
			if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := svcnet("apply", "-f", file)
			refused(t, h, out, err, "apply", "-f", file)
			ndocs := strings.Count(doc, "kind: ")
			for d := 1; d <= ndocs; d++ {
				if origin := fmt.Sprintf("%s#%d: ", file, d); !strings.Contains(out, origin) {
					t.Errorf("apply: no error names %s:\n%s", origin, out)
				}
			}
			if want := fmt.Sprintf("0 object(s) applied, %d rejected", ndocs); !strings.Contains(out, want) {
				t.Errorf("apply: want %q:\n%s", want, out)
			}
			if strings.ContainsRune(h.name, 0) {
				return // no command line argument holds a NUL
			}
			for _, kind := range []string{"svc", "pod", "endpointslice", "ep", "ns", "ipaddresspool"} {
				args := []string{"delete", kind, h.name, "-n", h.namespace, "--grace-period", "0s"}
				out, err := svcnet(args...)
				if h.namespace != "default" && (kind == "ns" || kind == "ipaddresspool") {
					// cluster-scoped: the namespace is ignored, the name is valid
					if err == nil || !strings.Contains(out, "not found") {
						t.Errorf("svcnet lab %q: %v:\n%s\nwant not found", args, err, out)
					}
					continue
				}
				refused(t, h, out, err, args...)
			}
			place := h.namespace + "/" + h.name
			for _, args := range [][]string{
				{"curl", place, "http://192.168.1.1/"},
				{"exec", place, "--", "true"},
				{"trace", place, "client"},
			} {
				out, err := svcnet(args...)
				if err == nil {
					t.Errorf("svcnet lab %q: succeeded, want a refusal:\n%s", args, out)
				} else if strings.Contains(out, "file name too long") {
					t.Errorf("svcnet lab %q: %s", args, out)
				}
			}
		})
	}
	if d := diffStates(before, treeState(t, victimDir)); len(d) > 0 {
		t.Errorf("files outside the lab's state changed:\n%s", strings.Join(d, "\n"))
	}
	for _, root := range []string{"/tmp", "/run", topology.EtcNetns} {
		if found := findNamed(root, "ESCAPED", 5); len(found) > 0 {
			t.Errorf("files named after a refused object: %q", found)
		}
	}
	if after := labNamespaces(t, name); !slices.Equal(after, nsBefore) {
		t.Errorf("the lab's network namespaces changed after only refusals: %q, were %q", after, nsBefore)
	}
	if b, err := os.ReadFile(filepath.Join(victimDir, "victim.yaml")); err != nil || !bytes.Equal(b, []byte("kept\n")) {
		t.Errorf("victim.yaml: %q, %v", b, err)
	}
	if after := podNames(); !slices.Equal(after, podsBefore) {
		t.Errorf("lab get pods after only refusals: %q, was %q", after, podsBefore)
	}

	// What the control plane refuses for want of something in the cluster
	// (checked when the whole cluster loads, not by Validate) names the
	// user's file too, not the copy the lab keeps under objects/.
	t.Run("LoadErrorsNameTheUsersFile", func(t *testing.T) {
		file := filepath.Join(manifests, "dualstack.yaml")
		doc := "apiVersion: v1\nkind: Service\nmetadata: {name: ds}\nspec: {ipFamilyPolicy: RequireDualStack, ports: [{port: 80}]}\n" +
			"---\napiVersion: v1\nkind: Service\nmetadata: {name: dns-again}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 53, protocol: UDP}]}\n"
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := svcnet("apply", "-f", file)
		if err == nil || !strings.Contains(out, file+"#1: Service default/ds: ") || !strings.Contains(out, file+"#2: Service default/dns-again: ") ||
			strings.Contains(out, names.Path("objects")) {
			t.Errorf("apply: %v:\n%s\nwant both refused, naming %s#1 and #2 and no file under %s", err, out, file, names.Path("objects"))
		}
	})

	t.Run("LongNamesCollidingWhenCut", func(t *testing.T) {
		stem := strings.Repeat("a", 200)
		pods := []string{stem + "-" + strings.Repeat("b", 52), stem + "-" + strings.Repeat("c", 52)}
		var doc strings.Builder
		for _, p := range pods {
			fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default}\nspec: {containers: [{name: c, image: x, ports: [{containerPort: 80}]}]}\n", p)
		}
		file := filepath.Join(manifests, "long.yaml")
		if err := os.WriteFile(file, []byte(doc.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := svcnet("apply", "-f", file); err != nil {
			t.Fatalf("apply: %v:\n%s", err, out)
		}
		out, err := svcnet("get", "pods", "-o", "wide")
		if err != nil {
			t.Fatalf("get pods: %v:\n%s", err, out)
		}
		for _, p := range pods {
			if !strings.Contains(out, p) {
				t.Errorf("get pods does not list %s:\n%s", p, out)
			}
			if !netns.Exists(names.Pod("default", p)) {
				t.Errorf("no network namespace %s for pod %s", names.Pod("default", p), p)
			}
			host, err := svcnet("exec", p, "--", "hostname")
			if want := strings.TrimRight(p[:63], "-."); err != nil || strings.TrimSpace(host) != want {
				t.Errorf("hostname in pod %s: %q, %v; want %q (cut as the kubelet cuts it)", p, host, err, want)
			}
		}
		if names.Pod("default", pods[0]) == names.Pod("default", pods[1]) {
			t.Fatalf("both pods share the namespace %s", names.Pod("default", pods[0]))
		}
		if out, err := svcnet("delete", "pod", pods[0], "--grace-period", "0s"); err != nil {
			t.Fatalf("delete: %v:\n%s", err, out)
		}
		out, err = svcnet("get", "pods")
		if err != nil || strings.Contains(out, pods[0]) || !strings.Contains(out, pods[1]) {
			t.Errorf("after deleting %s, get pods: %v:\n%s", pods[0], err, out)
		}
		if netns.Exists(names.Pod("default", pods[0])) || !netns.Exists(names.Pod("default", pods[1])) {
			t.Errorf("deleting one pod removed the wrong namespace")
		}
	})
}
