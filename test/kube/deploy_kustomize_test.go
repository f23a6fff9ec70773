package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// deployDir is the root of the manifests.
const deployDir = "../../deploy"

// TestDeployKustomize (kube tier: kubectl from tools/k8s) renders every
// kustomization under deploy/ with kubectl kustomize, as `kubectl apply -k`
// does: each yields exactly the objects of the files it lists (directories
// included), every container runs the image `make image` builds; and an
// overlay elsewhere that sets only the images knob moves every container to
// another registry and tag.
func TestDeployKustomize(t *testing.T) {
	_, bin := kubetest.Binaries(t, "kubectl")
	kubectl := filepath.Join(bin, "kubectl")
	var dirs []string
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return err
	})
	if err != nil || len(dirs) == 0 {
		t.Fatalf("kustomizations under %s: %v, %v", deployDir, dirs, err)
	}
	for _, dir := range dirs {
		t.Run(strings.TrimPrefix(dir, deployDir+"/"), func(t *testing.T) {
			objs := kustomize(t, kubectl, dir)
			if got, want := objectKeys(objs), objectKeys(listedObjects(t, dir)); !slices.Equal(got, want) {
				t.Errorf("kubectl kustomize %s:\n%s\nwant the listed files' objects:\n%s", dir, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, c := range containerImages(t, objs) {
				if c.image != kubetest.SvcnetImage {
					t.Errorf("%s: image %q, want %q", c.where, c.image, kubetest.SvcnetImage)
				}
			}

			overlay := t.TempDir()
			abs, err := filepath.Abs(dir)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(overlay, abs) // kustomize takes no absolute path
			if err != nil {
				t.Fatal(err)
			}
			k := kubetest.Kustomization{
				APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization", Resources: []string{rel},
				Images: []kubetest.KustomizeImage{{Name: kubetest.SvcnetRepository, NewName: "registry.example/mirror/svcnet", NewTag: "v9.9.9"}},
			}
			b, err := yaml.Marshal(k)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			moved := kustomize(t, kubectl, overlay)
			if got, want := objectKeys(moved), objectKeys(objs); !slices.Equal(got, want) {
				t.Errorf("overlay: objects %q, want %q", got, want)
			}
			for _, c := range containerImages(t, moved) {
				if c.image != "registry.example/mirror/svcnet:v9.9.9" {
					t.Errorf("overlay: %s: image %q, want registry.example/mirror/svcnet:v9.9.9", c.where, c.image)
				}
			}
		})
	}
}

// kustomize runs kubectl kustomize on dir and returns the objects.
func kustomize(t *testing.T, kubectl, dir string) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeObjects(t, dir, out)
}

// listedObjects returns the objects of the files dir's kustomization.yaml
// lists, directories' lists included.
func listedObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, r := range kubetest.ReadKustomization(t, dir).Resources {
		p := filepath.Join(dir, r)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", dir, err)
		}
		if fi.IsDir() {
			out = append(out, listedObjects(t, p)...)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeObjects(t, p, b)...)
	}
	return out
}

func decodeObjects(t *testing.T, what string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// objectKeys are "Kind namespace/name", sorted.
func objectKeys(objs []*unstructured.Unstructured) []string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.GetKind() + " " + objKey(o.GetNamespace(), o.GetName())
	}
	slices.Sort(keys)
	return keys
}

type containerImage struct{ where, image string }

// containerImages lists the image of every container and init container in
// the objects' Pod templates.
func containerImages(t *testing.T, objs []*unstructured.Unstructured) []containerImage {
	t.Helper()
	var out []containerImage
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			for _, c := range cs {
				m, _ := c.(map[string]any)
				image, _ := m["image"].(string)
				out = append(out, containerImage{where: fmt.Sprintf("%s %s %s %v", o.GetKind(), o.GetName(), field, m["name"]), image: image})
			}
		}
	}
	return out
}
