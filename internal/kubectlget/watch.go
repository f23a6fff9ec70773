package kubectlget

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// Watch is get -w: what Get prints, then, every interval until ctx ends,
// the rows (in the -o forms, the objects) of what changed among the
// query's objects: added, modified, and deleted ones as they last were,
// as kubectl prints its watch's events. fetch reads the state each time
// (the source polled, not watched). Names that do not exist end it at
// once, as kubectl's NotFound.
func Watch(ctx context.Context, out, errOut io.Writer, fetch func(context.Context) (*controlplane.Result, error),
	args []string, o Options, interval time.Duration) error {
	q, err := newQuery(args, o)
	if err != nil {
		return err
	}
	r, err := fetch(ctx)
	if err != nil {
		return err
	}
	found, err := q.list(out, errOut, r)
	if err != nil {
		return err
	}
	prev := seen(found)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			q.o.Now = now
		}
		r, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		found, _, err := q.pick(r)
		if err != nil {
			return err
		}
		cur := seen(found)
		var changed []listed
		for _, l := range found {
			c := listed{k: l.k}
			for _, obj := range l.objs {
				if p, ok := prev[key(l.k, obj)]; !ok || p.print != cur[key(l.k, obj)].print {
					c.objs = append(c.objs, obj)
				}
			}
			for k, p := range prev {
				if k.kind == l.k {
					if _, ok := cur[k]; !ok {
						c.objs = append(c.objs, p.obj)
					}
				}
			}
			changed = append(changed, c)
		}
		if err := q.print(out, errOut, changed, true, true); err != nil {
			return err
		}
		prev = cur
	}
}

// objKey names an object of a type across reads.
type objKey struct {
	kind            *kind
	namespace, name string
}

func key(k *kind, o Object) objKey { return objKey{k, o.GetNamespace(), o.GetName()} }

// version is an object as last read, and what tells a change: its
// resourceVersion, or its whole content where the source sets none.
type version struct {
	obj   Object
	print string
}

func seen(found []listed) map[objKey]version {
	out := map[objKey]version{}
	for _, l := range found {
		for _, obj := range l.objs {
			v := obj.GetResourceVersion()
			if v == "" {
				b, _ := json.Marshal(obj)
				v = string(b)
			}
			out[key(l.k, obj)] = version{obj, v}
		}
	}
	return out
}
