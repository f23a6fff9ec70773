package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

const (
	loadsMetric   = "svcnet_file_source_loads_total"
	recordsMetric = "svcnet_file_source_journal_records_total"
)

// scrape reads the Prometheus text at url through dial: each sample's value
// by its name and labels as written (`name{label="v"}`).
func scrape(t *testing.T, dial echo.DialFunc, url string) map[string]float64 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return out
}

// fileSourceReads is each lab agent's whole reads of the publication and
// journal records taken, by agent: every node's proxy and the cluster DNS.
func (e *env) fileSourceReads(t *testing.T) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	read := func(agent string, m map[string]float64) {
		loads, ok1 := m[loadsMetric]
		records, ok2 := m[recordsMetric]
		if !ok1 || !ok2 {
			t.Fatalf("%s's metrics have no %s or %s", agent, loadsMetric, recordsMetric)
		}
		out[agent] = [2]float64{loads, records}
	}
	for i := 1; i <= 3; i++ {
		read(fmt.Sprintf("node%d's proxy", i), scrape(t, e.dialer(topology.NodeName(i)), proxyMetricsURL))
	}
	dnsIP := e.podIn(lab.DNSNamespace, lab.DNSPod).Status.PodIP
	read("cluster DNS", scrape(t, e.dialer("client-1"), fmt.Sprintf("http://%s:9153/metrics", dnsIP)))
	return out
}

// agentsFollowJournal holds a file-mode lab's node agents to taking a change
// from the publication's journal: a Service applied through the lab's
// control-plane daemon is served by every node and answered by the cluster
// DNS without any of them reading the publication whole again.
func agentsFollowJournal(t *testing.T, e *env) {
	before := e.fileSourceReads(t)
	const name = "journal-probe"
	e.applyObjects(controlplane.Object{Origin: "agentsFollowJournal", Obj: &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}})
	t.Cleanup(func() {
		if err := e.l.Delete(e.ctx, "Service", "default", name, 0); err != nil {
			t.Errorf("delete Service %s: %v", name, err)
		}
	})
	url := clusterURL(e.service(name), 80)
	for _, from := range []string{"client-1", "web-2", "client-3"} {
		e.eventually(name+" answers "+from, func() error { return e.curl(from, url, 1, time.Second)[0].Err })
	}
	want := e.service(name).Spec.ClusterIP
	eventually(t, name+" resolves", func() error { return sameLines(e.resolve(t, "client-1", name), want) })
	// An agent counts a record just after writing it to its store: wait
	// for the counts to catch up with what was seen served.
	var after map[string][2]float64
	e.eventually("every agent counts a journal record", func() error {
		after = e.fileSourceReads(t)
		for agent, b := range before {
			if after[agent][1] <= b[1] {
				return fmt.Errorf("%s took no record from the journal (%v before, %v after)", agent, b[1], after[agent][1])
			}
		}
		return nil
	})
	for agent, b := range before {
		if a := after[agent]; a[0] != b[0] {
			t.Errorf("%s read the publication whole %v times for one applied Service; want none", agent, a[0]-b[0])
		}
	}
}
