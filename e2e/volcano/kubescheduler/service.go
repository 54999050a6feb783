package main

// A recording proxy in front of the service under test (internal/harness starts it) through which
// kube-scheduler's extender client reaches it: what each verb was sent and answered; the
// scenario's faults.

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Call is one call the proxy passed on: the verb (the last path element), what kube-scheduler
// sent and what it got.
type Call struct {
	Verb     string
	Request  []byte
	Status   int
	Response []byte
}

// Proxy stands between kube-scheduler's extender client and the service.
type Proxy struct {
	URL    string
	target string
	fail   map[string]int
	server *http.Server
	mu     sync.Mutex
	calls  []Call
}

// StartProxy serves on a free loopback port and forwards to target.
func StartProxy(target string, fail map[string]int) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), target: target, fail: fail}
	p.server = &http.Server{Handler: p}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	verb := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	call := Call{Verb: verb, Request: body}
	if status, ok := p.fail[verb]; ok {
		call.Status = status
		p.record(call)
		http.Error(w, "fault injected by the harness", status)
		return
	}
	resp, err := http.Post(p.target+r.URL.Path, r.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil { // nothing listening: kube-scheduler's client sees the connection fail too
		call.Status = -1
		p.record(call)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	call.Response, _ = io.ReadAll(resp.Body)
	call.Status = resp.StatusCode
	p.record(call)
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(call.Response)
}

func (p *Proxy) record(c Call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
}

// Calls returns the calls so far and forgets them.
func (p *Proxy) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

// Close stops the proxy.
func (p *Proxy) Close() { _ = p.server.Close() }
