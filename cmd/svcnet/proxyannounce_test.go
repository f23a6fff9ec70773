package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/lb/members"
)

// TestAnnounceKeyFlags: --announce l2 needs a key file or the explicit
// --announce-insecure; the file is read (and refused) before anything starts,
// its errors name the flag, the file and the line.
func TestAnnounceKeyFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	key, err := members.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("# a comment\nc2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		args     []string
		wantErr  string // "" for valid
		wantKeys int
	}{
		{nil, "", 0},
		{[]string{"--announce", "l2", "--announce-key-file", good}, "", 1},
		{[]string{"--announce", "l2", "--announce-insecure"}, "", 0},
		{[]string{"--announce", "l2"}, "--announce l2: no heartbeat key: give --announce-key-file FILE", 0},
		{[]string{"--announce", "l2", "--announce-key-file", good, "--announce-insecure"}, "give one, not both", 0},
		{[]string{"--announce-key-file", good}, "give --announce l2 too", 0},
		{[]string{"--announce-insecure"}, "give --announce l2 too", 0},
		{[]string{"--announce", "l2", "--announce-key-file", bad}, "--announce-key-file: heartbeat key file " + bad + ": line 2: key of 5 bytes, want 16 to 1024", 0},
		{[]string{"--announce", "l2", "--announce-key-file", missing}, "--announce-key-file: heartbeat key file: open " + missing, 0},
		{[]string{"--announce", "l2", "--announce-insecure", "--announce-heartbeat-window", "0s"}, "--announce-heartbeat-window 0s: want a positive duration", 0},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := &proxyOptions{}
			if err := proxyCommand(o).Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.announce.validate()
			if err == nil {
				err = o.announce.loadKeys()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate, loadKeys: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate, loadKeys: err = %v, want %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), key):
				t.Fatalf("the error shows the key: %v", err)
			}
			if got := keyIDs(o.announce.keys); len(got) != tt.wantKeys {
				t.Errorf("keys %v, want %d", got, tt.wantKeys)
			}
		})
	}
	if f := proxyCommand(&proxyOptions{}).Flags().Lookup("announce-heartbeat-window"); f == nil || f.DefValue != "5s" {
		t.Errorf("--announce-heartbeat-window: %+v, want default 5s", f)
	}
}

// TestProxyRefusesUnsignedSpeaker runs the whole command: svcnet proxy
// --announce l2 without a key stops before it reads any state or touches the
// kernel, with the error that says what to give.
func TestProxyRefusesUnsignedSpeaker(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.yaml")
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newProxyCommand()
	cmd.SetArgs([]string{"--state", state, "--hostname-override", "node1", "--announce", "l2", "--healthz-bind-address", "", "--metrics-bind-address", ""})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--announce l2: no heartbeat key") || !strings.Contains(err.Error(), "--announce-insecure") {
		t.Fatalf("svcnet proxy --announce l2 without a key: %v, want the no-key error naming both ways out", err)
	}
}
