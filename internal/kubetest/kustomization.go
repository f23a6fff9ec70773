package kubetest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// SvcnetImage is the image reference deploy/'s manifests name: what `make
// image` tags its build with besides the git describe tag.
const SvcnetImage = SvcnetRepository + ":latest"

// SvcnetRepository is svcnet's image repository, the name kustomize's images
// field matches in every kustomization.yaml under deploy/.
const SvcnetRepository = "ghcr.io/svcnet/svcnet"

// Kustomization is a kustomization.yaml with the fields deploy/ uses.
type Kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Patches    []KustomizePatch `json:"patches,omitempty"`
	Images     []KustomizeImage `json:"images,omitempty"`
}

// KustomizePatch is an inline patch.
type KustomizePatch struct {
	Patch string `json:"patch"`
}

// KustomizeImage is one entry of the images field: containers whose image is
// Name (any tag) get NewName, and NewTag or Digest.
type KustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// ReadKustomization reads dir/kustomization.yaml strictly (a field other than
// Kustomization's fails t) and checks its kind and apiVersion.
func ReadKustomization(t testing.TB, dir string) Kustomization {
	t.Helper()
	p := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var k Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s: %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", p, k.APIVersion, k.Kind)
	}
	return k
}

// CheckImageKnob fails t unless k's images field is the one documented knob
// for svcnet's image: a single entry for SvcnetRepository that leaves it as
// the manifests name it (SvcnetImage), ready to be pointed elsewhere.
func CheckImageKnob(t testing.TB, dir string, k Kustomization) {
	t.Helper()
	want := []KustomizeImage{{Name: SvcnetRepository, NewName: SvcnetRepository, NewTag: "latest"}}
	if !slices.Equal(k.Images, want) {
		t.Errorf("%s/kustomization.yaml: images %+v, want %+v", dir, k.Images, want)
	}
}
