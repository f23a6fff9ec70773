package cluster

import (
	"strings"
	"testing"
)

// TestSpeakerSettled: a speaker is settled once ready and counting every
// other node alive.
func TestSpeakerSettled(t *testing.T) {
	for _, tc := range []struct {
		text string
		ok   bool
		why  string
	}{
		{"# HELP x\nsvcnet_proxy_speaker_ready 1\nsvcnet_proxy_speaker_peers_alive 2\n", true, ""},
		{"svcnet_proxy_speaker_ready 0\nsvcnet_proxy_speaker_peers_alive 2\n", false, "warming up"},
		{"svcnet_proxy_speaker_ready 1\nsvcnet_proxy_speaker_peers_alive 1\n", false, "want 2"},
		{"svcnet_proxy_speaker_ready_other 1\n", false, "is -1"},
	} {
		err := speakerSettled(tc.text, 2)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.why)) {
			t.Errorf("%q: %v, want ok %v (%s)", tc.text, err, tc.ok, tc.why)
		}
	}
}

// TestProxyMetricsAddr: the svcnet proxy's default, the helper's beside
// kube-proxy, an override among the proxy arguments, and none when turned
// off.
func TestProxyMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
		ok   bool
	}{
		{Info{}, "127.0.0.1:10249", true},
		{Info{Proxy: ProxyKubeProxyIPTables}, helperMetricsAddr, true},
		{Info{ProxyArgs: []string{"--metrics-bind-address", "127.0.0.1:9999"}}, "127.0.0.1:9999", true},
		{Info{ProxyArgs: []string{"--metrics-bind-address="}}, "", false},
	} {
		c := &Cluster{Info: &tc.info}
		if got, ok := c.proxyMetricsAddr(); got != tc.want || ok != tc.ok {
			t.Errorf("%+v: %q %v, want %q %v", tc.info, got, ok, tc.want, tc.ok)
		}
	}
}
