package dns

import (
	"net/http"
)

// NewHTTPHandler serves /metrics (m) and /healthz: 200 "ok" once ready
// reports true (the server answers from a synced model), 503 before.
func NewHTTPHandler(m *Metrics, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not synced\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
