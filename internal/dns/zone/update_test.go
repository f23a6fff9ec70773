package zone

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// TestUpdateIsBuild: after each of 400 random changes (Services added,
// changed between kinds, deleted; slices added, moved, emptied; ClusterIPs
// and endpoint addresses shared between Services; kube-system/kube-dns
// coming and going), the View Update makes from the last one is the one
// Build makes of the snapshot.
func TestUpdateIsBuild(t *testing.T) {
	cfg := Config{TTL: 5}
	store := model.NewStore()
	sub := store.Subscribe()
	defer sub.Close()
	snap, _ := sub.Next()
	v := Build(cfg, snap)
	// Every View made, with what it held then: a later Update must not
	// change it.
	type kept struct {
		v    *View
		dump viewDump
	}
	var views []kept
	rng := rand.New(rand.NewPCG(3, 4))
	tcp := model.ProtocolTCP
	names := []model.ServiceKey{{Namespace: "kube-system", Name: "kube-dns"}}
	for i := range 12 {
		names = append(names, model.ServiceKey{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("s%d", i)})
	}
	ip := func() string { return fmt.Sprintf("10.96.0.%d", 1+rng.IntN(6)) }      // shared now and then
	podIP := func() string { return fmt.Sprintf("192.168.1.%d", 1+rng.IntN(8)) } // likewise
	ports := []model.EndpointPort{epp("http", tcp, 8080)}
	for step := range 400 {
		k := names[rng.IntN(len(names))]
		var what string
		store.Update(func(tx *model.Txn) {
			switch r := rng.IntN(10); {
			case r < 3:
				what = "ClusterIP Service " + k.String()
				tx.SetService(clusterIP(k.Namespace, k.Name, []string{ip()}, sp("http", tcp, 80)))
			case r == 3:
				what = "headless Service " + k.String()
				tx.SetService(headless(k.Namespace, k.Name, sp("http", tcp, 80)))
			case r == 4:
				what = "ExternalName Service " + k.String()
				tx.SetService(externalName(k.Namespace, k.Name, "www.example.com"))
			case r == 5:
				what = "delete Service " + k.String()
				tx.DeleteService(k)
			case r < 8:
				what = "slice of " + k.String()
				name := fmt.Sprintf("%s-%d", k.Name, rng.IntN(2))
				if rng.IntN(3) == 0 { // moved to another Service
					k = names[rng.IntN(len(names))]
				}
				tx.SetEndpointSlice(slice(k.Namespace, name, k.Name, ipfamily.IPv4, ports,
					ep(podIP(), fmt.Sprintf("h%d", rng.IntN(2)), rng.IntN(4) > 0), ep(podIP(), "", true)))
			case r == 8:
				what = "delete a slice of " + k.String()
				tx.DeleteEndpointSlice(k.Namespace, fmt.Sprintf("%s-%d", k.Name, rng.IntN(2)))
			default:
				what = "two Services at once"
				tx.SetService(clusterIP(k.Namespace, k.Name, []string{ip(), "fd00:96::1"}, sp("dns", model.ProtocolUDP, 53)))
				o := names[rng.IntN(len(names))]
				tx.DeleteService(o)
			}
		})
		snap, changes := sub.Next()
		keys := make([]model.ServiceKey, 0, len(changes.Services))
		for _, c := range changes.Services {
			keys = append(keys, c.Key)
		}
		got, want := dump(v.Update(snap, keys)), dump(Build(cfg, snap))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%s): Update gives\n%+v\nBuild\n%+v", step, what, got, want)
		}
		views = append(views, kept{v, dump(v)})
		v = v.Update(snap, keys)
	}
	if v.services.Len() < 5 {
		t.Errorf("only %d Services at the end: the changes did not cover much", v.services.Len())
	}
	for i, k := range views {
		if got := dump(k.v); !reflect.DeepEqual(got, k.dump) {
			t.Fatalf("the View before step %d changed after it:\n%+v\nwas\n%+v", i, got, k.dump)
		}
	}
}

// viewDump is what a View holds, in plain maps: two Views answer alike
// when their dumps are equal.
type viewDump struct {
	zone                    string
	zoneLabels              []string
	ttl, serial             uint32
	services                map[svcKey]*service
	namespaces              map[string]int
	ptrService              map[netip.Addr]string
	ptrEndpoint             map[netip.Addr]ptrTargets
	byClusterIP, byEndpoint map[netip.Addr]holders
	nsTarget                string
	nsAddrs                 []netip.Addr
}

func dump(v *View) viewDump {
	return viewDump{zone: v.zone, zoneLabels: v.zoneLabels, ttl: v.ttl, serial: v.serial,
		services: maps.Collect(v.services.All()), namespaces: maps.Collect(v.namespaces.All()),
		ptrService: dumpAddrs(v.ptrService), ptrEndpoint: dumpAddrs(v.ptrEndpoint),
		byClusterIP: dumpAddrs(v.byClusterIP), byEndpoint: dumpAddrs(v.byEndpoint),
		nsTarget: v.nsTarget, nsAddrs: v.nsAddrs}
}

func dumpAddrs[V any](m addrMap[V]) map[netip.Addr]V {
	out := map[netip.Addr]V{}
	for k, v := range m.v4.All() {
		out[netip.AddrFrom4([4]byte{byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)})] = v
	}
	for k, v := range m.v6.All() {
		out[netip.AddrFrom16(k)] = v
	}
	return out
}

// BenchmarkUpdate: one changed Service of 10,000, made by Update from the
// last View and by Build.
func BenchmarkUpdate(b *testing.B) {
	snap := bigSnapshot(b, 10000)
	cfg := Config{TTL: 5}
	v := Build(cfg, snap)
	store := model.NewStore()
	sub := store.Subscribe()
	defer sub.Close()
	store.Update(func(tx *model.Txn) {
		tx.Replace(nil, snap.EndpointSlices(), nil, nil)
		for _, st := range snap.Services() {
			tx.SetService(st.Service)
		}
	})
	sub.Next()
	k := model.ServiceKey{Namespace: "ns-34", Name: "svc-1234"}
	for _, how := range []string{"update", "build"} {
		b.Run(how, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				store.Update(func(tx *model.Txn) {
					tx.SetService(clusterIP(k.Namespace, k.Name, []string{fmt.Sprintf("10.97.%d.%d", i>>8&0xff, i&0xff)}, sp("http", model.ProtocolTCP, 80)))
				})
				next, ch := sub.Next()
				keys := []model.ServiceKey{ch.Services[0].Key}
				b.StartTimer()
				if how == "update" {
					v = v.Update(next, keys)
				} else {
					v = Build(cfg, next)
				}
			}
		})
	}
}
