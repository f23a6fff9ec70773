package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// TestStateEncoderMatchesMarshalIndent writes a sequence of random States,
// each a few changes from the last, with one stateEncoder, and compares
// every encoding with json.MarshalIndent's.
func TestStateEncoderMatchesMarshalIndent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	someStrings := func() []string {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		return []string{fmt.Sprint("10.96.0.", r.IntN(4)), "fd00:96::1"}
	}
	alloc := func() controlplane.ServiceAlloc {
		a := controlplane.ServiceAlloc{UID: fmt.Sprint("uid-", r.IntN(3)), Created: base.Add(time.Duration(r.IntN(3)) * time.Second),
			ClusterIPs: someStrings(), HealthCheckNodePort: int32(r.IntN(2) * 30001), LoadBalancerIPs: someStrings()}
		switch r.IntN(3) {
		case 1:
			a.NodePorts = map[string]int32{}
		case 2:
			a.NodePorts = map[string]int32{"TCP/80": 30080, "UDP/53": int32(30053 + r.IntN(2))}
		}
		if r.IntN(4) == 0 {
			a.Created = a.Created.In(time.FixedZone("X", 3600))
		}
		return a
	}
	// Keys that json escapes, and keys that sort differently as bytes and
	// as escaped strings.
	keys := []string{"default/a", "default/b", "ns/<web>", "ns/a&b", "x/ü", "x/\u2028", "z/\"q\""}
	var st controlplane.State
	var e stateEncoder
	oneShot := stateEncoder{oneShot: true}
	for step := range 400 {
		if r.IntN(20) == 0 {
			st = controlplane.State{}
		}
		for range 1 + r.IntN(3) {
			k := keys[r.IntN(len(keys))]
			switch r.IntN(7) {
			case 0:
				delete(st.Services, k)
			case 1, 2:
				if st.Services == nil {
					st.Services = map[string]controlplane.ServiceAlloc{}
				}
				a, ok := st.Services[k]
				if !ok {
					st.Services[k] = alloc()
					break
				}
				// One field at a time: each must tell entries apart.
				b := alloc()
				switch r.IntN(7) {
				case 0:
					a.UID = b.UID + "x"
				case 1:
					a.Created = a.Created.Add(time.Second)
				case 2:
					a.ClusterIPs = append(slices.Clone(a.ClusterIPs), "10.96.9.9")
				case 3:
					a.NodePorts = maps.Clone(a.NodePorts)
					if a.NodePorts == nil {
						a.NodePorts = map[string]int32{}
					}
					a.NodePorts["TCP/80"]++
				case 4:
					a.HealthCheckNodePort++
				case 5:
					a.LoadBalancerIPs = append(slices.Clone(a.LoadBalancerIPs), "172.26.236.200")
				case 6:
					a.Created = a.Created.In(time.FixedZone("Y", -3600))
				}
				st.Services[k] = a
			case 3:
				if st.Created == nil {
					st.Created = map[string]time.Time{}
				}
				st.Created["Pod/"+k] = base.Add(time.Duration(r.IntN(3)) * time.Minute)
			case 4:
				delete(st.Created, "Pod/"+k)
			case 5:
				if st.Pools == nil {
					st.Pools = map[string][]string{}
				}
				st.Pools[k] = someStrings()
			case 6:
				delete(st.Pools, k)
			}
		}
		want, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		var got bytes.Buffer
		if err := e.encode(&got, st); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Fatalf("step %d: encoder wrote\n%s\nMarshalIndent\n%s", step, got.String(), want)
		}
		got.Reset()
		if err := oneShot.encode(&got, st); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Fatalf("step %d: one-shot encoder wrote\n%s\nMarshalIndent\n%s", step, got.String(), want)
		}
		if oneShot.services.entries != nil || oneShot.created.entries != nil || oneShot.pools.entries != nil {
			t.Fatalf("step %d: the one-shot encoder kept encodings", step)
		}
		// The next step changes maps the encoder saw: it must not keep
		// them, only values.
		st = cloneState(st)
	}
}

func cloneState(st controlplane.State) controlplane.State {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	var out controlplane.State
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	// Unmarshal keeps no empty map; keep the same shape as st otherwise.
	if st.Services != nil && out.Services == nil {
		out.Services = map[string]controlplane.ServiceAlloc{}
	}
	return out
}
