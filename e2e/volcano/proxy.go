package main

// A transparent proxy between Volcano's extender plugin and the service: it counts the calls
// per verb (which verbs a release really calls) and plays a scenario's fault.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"sync"
	"time"
)

// Proxy forwards every request to the service and counts it.
type Proxy struct {
	URL      string
	server   *http.Server
	listener net.Listener
	fault    *Fault
	stop     func()

	mu       sync.Mutex
	victims  []VictimCall // every preemptable and reclaimable exchange, in order
	calls    map[string]int
	failures map[string]int // calls answered with anything but a 200 from the service
	stopped  bool
}

// StartProxy listens on a free loopback port; stop is called once the fault's Stop triggers.
func StartProxy(target string, fault *Fault, stop func()) (*Proxy, error) {
	to, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), listener: l, fault: fault, stop: stop,
		calls: map[string]int{}, failures: map[string]int{}}
	forward := httputil.NewSingleHostReverseProxy(to)
	forward.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	// A call Volcano gave up on (a fault's delay, a killed service) is the scenario's point, not
	// an error to print ("http: proxy error: context canceled" with a nil ErrorLog).
	forward.ErrorLog = log.New(io.Discard, "", 0)
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := path.Base(r.URL.Path)
		if trace {
			traceCall(verb, r)
		}
		if !p.admit(verb) {
			// As if nothing listened any more: the connection closes without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if status := p.failStatus(verb); status != 0 {
			p.mu.Lock()
			p.failures[verb]++
			p.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"error": "injected by the scenario's fault.fail"}`))
			return
		}
		if d := p.delay(verb); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if victimVerb(verb) {
			call := recordVictims(verb, r)
			body := &bodyRecorder{statusRecorder: rec}
			forward.ServeHTTP(body, r)
			call.answered(rec.status, body.body.Bytes())
			p.mu.Lock()
			p.victims = append(p.victims, call)
			p.mu.Unlock()
		} else {
			forward.ServeHTTP(rec, r)
		}
		if rec.status != http.StatusOK {
			p.mu.Lock()
			p.failures[verb]++
			p.mu.Unlock()
		}
	})}
	go p.server.Serve(l)
	return p, nil
}

// admit counts the call and says whether the service is still there for it.
func (p *Proxy) admit(verb string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[verb]++
	if p.stopped {
		p.failures[verb]++
		return false
	}
	if p.fault != nil && p.fault.Stop != nil && verb == p.fault.Stop.Verb && p.calls[verb] > p.fault.Stop.Count {
		p.stopped = true
		p.stop()
		p.failures[verb]++
		return false
	}
	return true
}

func (p *Proxy) delay(verb string) time.Duration {
	if p.fault == nil || p.fault.Delay[verb] == "" {
		return 0
	}
	d, _ := time.ParseDuration(p.fault.Delay[verb])
	return d
}

// trace (E2E_VOLCANO_TRACE=1) prints each call's verb and the task or job it is about.
var trace = os.Getenv("E2E_VOLCANO_TRACE") != ""

func traceCall(verb string, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var about struct {
		Task, Evictor, Job *struct{ Namespace, Name string }
		Node               *struct{ Name string }
	}
	_ = json.Unmarshal(body, &about)
	line := verb
	for _, o := range []*struct{ Namespace, Name string }{about.Task, about.Evictor, about.Job} {
		if o != nil {
			line += " " + o.Namespace + "/" + o.Name
		}
	}
	if about.Node != nil {
		line += " on " + about.Node.Name
	}
	fmt.Fprintln(os.Stderr, "call:", line)
}

// failStatus is the HTTP status the scenario answers this verb with instead of the service (0: none).
func (p *Proxy) failStatus(verb string) int {
	if p.fault == nil {
		return 0
	}
	return p.fault.Fail[verb]
}

// VictimCalls is every preemptable and reclaimable exchange the service answered, in order.
func (p *Proxy) VictimCalls() []VictimCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]VictimCall{}, p.victims...)
}

// Calls is how often each verb was called.
func (p *Proxy) Calls() map[string]int { return p.copyOf(p.calls) }

// Failures is how many calls of each verb got no 200 from the service.
func (p *Proxy) Failures() map[string]int { return p.copyOf(p.failures) }

func (p *Proxy) copyOf(counts map[string]int) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range counts {
		out[k] = v
	}
	return out
}

// Close stops listening.
func (p *Proxy) Close() { p.server.Close() }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
