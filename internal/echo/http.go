package echo

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
)

// Reply is the JSON answer to GET /.
type Reply struct {
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	PodIP  string `json:"podIP"`
	Client string `json:"client"` // the client's IP:PORT as the server saw it
	Server string `json:"server"` // the local IP:PORT the request arrived on
}

// handler serves the HTTP paths of the package doc.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	text := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, body)
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		rep := Reply{Pod: s.cfg.Name, Node: s.cfg.Node, PodIP: addrString(s.cfg), Client: r.RemoteAddr}
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			rep.Server = a.String()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) { text(w, s.cfg.Name) })
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) { text(w, r.RemoteAddr) })
	ok := func(w http.ResponseWriter, _ *http.Request) { text(w, "ok") }
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/healthz", ok)
	return mux
}
