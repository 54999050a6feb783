package main

// The service under test: a real `policy-extender serve` (gunicorn, 2 workers) on loopback with
// the scenario's policies, and a recording proxy in front of it through which kube-scheduler's
// extender client reaches it (what each verb was sent and answered; the scenario's faults).

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Service is one running `policy-extender serve`.
type Service struct {
	URL    string
	cmd    *exec.Cmd
	logDir string
	log    *os.File
}

// StartService writes the policies into workDir/policies and starts the service on them.
func StartService(command []string, repo, workDir string, s *Scenario) (*Service, error) {
	policyDir := filepath.Join(workDir, "policies")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		return nil, err
	}
	for name, text := range s.Policies {
		if err := os.WriteFile(filepath.Join(policyDir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	for _, file := range s.PolicyFiles {
		data, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(policyDir, filepath.Base(file)), data, 0o644); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := append(append([]string{}, command[1:]...), "serve",
		"--bind", fmt.Sprintf("127.0.0.1:%d", port), "--workers", "2", "--threads", "8",
		"--policy-dirs", policyDir, "--tally-flush-seconds", "0.05", "--log-level", "warning")
	cmd := exec.Command(command[0], args...)
	log, err := os.Create(filepath.Join(workDir, "service.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that Kill reaches every worker
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	svc := &Service{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, logDir: workDir, log: log}
	if err := svc.waitReady(30 * time.Second); err != nil {
		svc.Kill()
		return nil, fmt.Errorf("%w\n%s", err, svc.Log())
	}
	return svc, nil
}

func (s *Service) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if s.cmd.ProcessState != nil {
			return fmt.Errorf("policy-extender serve exited")
		}
		resp, err := http.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("policy-extender serve was not ready within %v", limit)
}

// Kill ends the service at once, every process of its group (a crash, not a shutdown).
func (s *Service) Kill() {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.log.Close()
}

// Stop shuts the service down gracefully.
func (s *Service) Stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	s.log.Close()
}

// Log is what the service printed, for a failure's report.
func (s *Service) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.logDir, "service.log"))
	text := strings.TrimSpace(string(data))
	if len(text) > 4000 {
		text = "...\n" + text[len(text)-4000:]
	}
	return text
}

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
