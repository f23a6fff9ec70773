package proxy

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// ReasonServiceSkipped is the reason of the Warning event the proxy
// records on a Service (or one of its ports) it does not serve.
const ReasonServiceSkipped = "ServiceSkipped"

// reportSkipped logs each skip error once per distinct text, and records
// it as a Warning event on its Service (Deps.Events).
func (p *Proxier) reportSkipped(t *servicetable.Table) {
	now := map[string]bool{}
	for _, e := range t.Errors {
		msg := e.Error()
		now[msg] = true
		if !p.reported[msg] {
			p.log.Info("Service skipped on this node", "service", e.Service.String(), "port", e.Port, "reason", e.Reason)
			p.recordSkipped(e)
			if m := p.deps.Metrics; m != nil {
				reason := "invalid"
				if e.Conflict {
					reason = "conflict"
				}
				m.SkippedServicesTotal.WithLabelValues(reason).Inc()
			}
		}
	}
	p.reported = now
}

// recordSkipped records e as a Warning event on its Service, naming the
// node: "[port P] [(FAMILY)] not served on node N: REASON".
func (p *Proxier) recordSkipped(e *servicetable.SkipError) {
	if p.deps.Events == nil {
		return
	}
	ref := &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: e.Service.Namespace, Name: e.Service.Name}
	if st := p.snap.Service(e.Service); st != nil && st.Service != nil {
		ref.UID = types.UID(st.Service.UID)
	}
	what := "not served"
	if e.Family != 0 {
		what = "(" + e.Family.String() + ") " + what
	}
	if e.Port != "" {
		what = "port " + e.Port + " " + what
	}
	p.deps.Events.Eventf(ref, v1.EventTypeWarning, ReasonServiceSkipped, "%s on node %s: %s", what, p.cfg.NodeName, e.Reason)
}

func (p *Proxier) record(res SyncResult, start, end time.Time) {
	m := p.deps.Metrics
	if m == nil {
		return
	}
	for _, f := range p.cfg.Families {
		fam := f.String()
		if res.Err != nil {
			m.NFTablesSyncFailuresTotal.WithLabelValues(fam).Inc()
			continue
		}
		d := end.Sub(start).Seconds()
		m.SyncProxyRulesLatency.WithLabelValues(fam).Observe(d)
		if res.Full {
			m.SyncFullProxyRulesLatency.WithLabelValues(fam).Observe(d)
		} else {
			m.SyncPartialProxyRulesLatency.WithLabelValues(fam).Observe(d)
		}
		m.SyncProxyRulesLastTimestamp.WithLabelValues(fam).Set(float64(end.Unix()))
		if n := res.Ops[f]; n > 0 {
			m.NFTablesTransactionOps.WithLabelValues(fam).Observe(float64(n))
		}
		if res.Drift {
			m.DriftRepairsTotal.WithLabelValues(fam).Inc()
		}
		m.ObserveNetworkProgramming(fam, end, p.triggers...)
		if res.ConntrackDeleted > 0 {
			m.ConntrackEntriesDeletedTotal.WithLabelValues(fam).Add(float64(res.ConntrackDeleted))
		}
	}
	if res.Err == nil {
		p.triggers = nil
		for _, f := range p.cfg.Families {
			m.Services.WithLabelValues(f.String()).Set(float64(p.sum.services[f]))
			for _, pol := range []string{"internal", "external"} {
				m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(pol, f.String()).Set(float64(p.sum.noLocal[noLocalKey{pol, f}]))
			}
		}
	}
	m.ServiceChangesPending.Set(0)
	m.EndpointChangesPending.Set(0)
}

// apiFamily returns Kubernetes' spelling of family f.
func apiFamily(f ipfamily.Family) v1.IPFamily { return v1.IPFamily(f.String()) }
