package syncbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// EnvProfile, when set (to anything but "" or "0"), runs svcnet proxy with
// --profiling and makes every memory reading of a run (after the full sync,
// after the last change) also save, beside the proxy's log (LOG is
// SVCNET_BENCH_LOGDIR/sv-N.log):
//
//	LOG.K.heap      the in-use heap profile (go tool pprof -sample_index=inuse_space)
//	LOG.K.metrics   /metrics (go_memstats_*, go_gc_*, the runtime's /gc and /memory metrics)
//	LOG.K.status    /proc/PID/status and /proc/PID/smaps_rollup (RssAnon, RssFile, ...)
//
// with K = 1, 2, ... in reading order. VmRSS is read before the profile is
// fetched, so the figures in the report are not disturbed by it; the fetch
// (tens of milliseconds) happens outside any timed interval but may delay the
// first change by as much. Failures to save are logged into the proxy's log
// and never fail the run.
const EnvProfile = "SVCNET_BENCH_PROFILE"

// EnvSvcnetEnv adds KEY=VALUE pairs (space-separated) to svcnet proxy's
// environment, for experiments with the Go runtime: GODEBUG=gctrace=1 (a line
// per collection in the proxy's log), GOGC=..., GOMEMLIMIT=...,
// GODEBUG=memprofilerate=1 (exact heap profiles with EnvProfile, and a much
// slower proxy: for attributing memory, never for timings).
const EnvSvcnetEnv = "SVCNET_BENCH_SVCNET_ENV"

// profileEnabled reports whether EnvProfile asks for profiles.
func profileEnabled() bool {
	v := os.Getenv(EnvProfile)
	return v != "" && v != "0"
}

// profileTimeout bounds one profile snapshot (three HTTP requests and two
// file reads).
const profileTimeout = 30 * time.Second

// saveProfiles writes the K-th snapshot of p's memory (see EnvProfile). The
// metrics server is at metricsAddr inside ns.
func saveProfiles(ns *netns.NS, pid int, base string, k int, metricsAddr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), profileTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}}
	prefix := fmt.Sprintf("%s.%d", base, k)
	var errs []string
	for _, f := range []struct{ path, suffix string }{
		{"/debug/pprof/heap", ".heap"},
		{"/metrics", ".metrics"},
	} {
		if err := fetch(ctx, client, "http://"+metricsAddr+f.path, prefix+f.suffix); err != nil {
			errs = append(errs, err.Error())
		}
	}
	var status strings.Builder
	for _, name := range []string{"status", "smaps_rollup"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		fmt.Fprintf(&status, "=== /proc/%d/%s\n%s", pid, name, b)
	}
	if err := os.WriteFile(prefix+".status", []byte(status.String()), 0o644); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("save profiles %s: %s", prefix, strings.Join(errs, "; "))
	}
	return nil
}

// fetch GETs url into the file path.
func fetch(ctx context.Context, c *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("get %s: %w", url, err)
	}
	return f.Close()
}
