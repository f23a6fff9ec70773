package install

import (
	"strings"
	"testing"
)

func TestChooseCNIVersion(t *testing.T) {
	for _, tc := range []struct {
		flag, runtime, want string
	}{
		{"auto", "containerd://1.6.20", "1.0.0"},
		{"auto", "containerd://1.6.20~ds1", "1.0.0"},
		{"auto", "containerd://v1.7.27", "1.0.0"},
		{"auto", "containerd://1.7.7-k3s1", "1.0.0"},
		{"auto", "containerd://2.0.0", "1.1.0"},
		{"auto", "containerd://v2.4.2", "1.1.0"},
		{"", "containerd://2.1.4", "1.1.0"},
		{"auto", "cri-o://1.30.4", "1.0.0"},
		{"auto", "cri-o://1.31.0", "1.1.0"},
		{"auto", "cri-o://1.34.1", "1.1.0"},
		{"auto", "docker://24.0.7", "1.0.0"},
		{"auto", "", "1.0.0"},
		{"auto", "containerd", "1.0.0"},
		{"1.1.0", "containerd://1.6.20", "1.1.0"},
		{"1.0.0", "containerd://2.4.2", "1.0.0"},
	} {
		got, reason, err := ChooseCNIVersion(tc.flag, tc.runtime)
		if err != nil || got != tc.want || reason == "" {
			t.Errorf("ChooseCNIVersion(%q, %q) = %q (%s), %v; want %q", tc.flag, tc.runtime, got, reason, err, tc.want)
		}
	}
	for _, bad := range []string{"0.4.0", "1.2.0", "latest"} {
		if _, _, err := ChooseCNIVersion(bad, "containerd://2.0.0"); err == nil || !strings.Contains(err.Error(), "--cni-version") {
			t.Errorf("--cni-version %q: error %v, want one naming the flag", bad, err)
		}
	}
}
