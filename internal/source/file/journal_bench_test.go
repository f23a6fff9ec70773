package file

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/model"
)

// BenchmarkPublicationChange: what a reader of a publication (a node's
// proxy in a lab) spends on one changed Service, with 1,000 and 10,000
// Services and a slice each: taking the change from the journal, and
// reading the publication whole. The publisher's side is not timed.
func BenchmarkPublicationChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, how := range []string{"journal", "whole"} {
			b.Run(fmt.Sprintf("services=%d/%s", n, how), func(b *testing.B) { benchPublicationChange(b, n, how == "journal") })
		}
	}
}

func benchPublicationChange(b *testing.B, n int, journal bool) {
	dir := b.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	p := &publisher{t: b, path: path, pub: NewPublisher(path, true), cfg: controlplane.Config{}}
	c := cluster{}
	for i := range n {
		name := fmt.Sprintf("svc%05d", i)
		c["svc-"+name] = jService(name, 80, nil, nil)
		c["slice-"+name] = jSlice(name+"-1", name, fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256))
	}
	p.publish(c)
	store := model.NewStore()
	src := New(Options{Path: path}, store, klog.Background())
	var bg sync.WaitGroup
	defer bg.Wait()
	if err := src.reload(context.Background(), &bg, true); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		c["svc-svc00000"] = jService("svc00000", int32(81+i%1000), nil, nil)
		p.publish(c)
		b.StartTimer()
		if journal {
			if !src.followJournal() {
				b.Fatal("not followed")
			}
		} else if err := src.reload(context.Background(), &bg, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got := store.Snapshot().Service(model.ServiceKey{Namespace: "default", Name: "svc00000"}); got == nil || got.Service.Ports[0].Port != int32(81+(b.N-1)%1000) {
		b.Fatalf("the last change is not in the store: %+v", got)
	}
}
