// Package harness is what the two e2e harnesses share: the Volcano scheduler's (e2e/volcano)
// and kube-scheduler's (e2e/volcano/kubescheduler). It starts and stops a real
// `policy-extender serve`, reads scenario files, defines the common command-line flags and
// prints the common parts of a scenario's report. It imports neither Volcano nor kube-scheduler
// (only klog, which both log through), so it builds with every release's module graph
// (e2e/volcano/releases/*.mod).
package harness

// The service under test: a real `policy-extender serve` (gunicorn, 2 workers) on loopback with
// the scenario's policies, started per scenario and stopped after it.

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartService writes the policies (file name -> text) into workDir/policies and starts the
// service on them, with extra options after the harness's own (the later option wins).
func StartService(command []string, workDir string, policies map[string]string, extra []string) (*Service, error) {
	policyDir := filepath.Join(workDir, "policies")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		return nil, err
	}
	for name, text := range policies {
		if err := os.WriteFile(filepath.Join(policyDir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, command[1:]...), "serve",
		"--bind", fmt.Sprintf("127.0.0.1:%d", port), "--workers", "2", "--threads", "8",
		"--policy-dirs", policyDir, "--tally-flush-seconds", "0.05", "--log-level", "warning")
	args = append(args, extra...)
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
	s := &Service{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, logDir: workDir, log: log}
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Kill()
		return nil, fmt.Errorf("%w\n%s", err, s.Log())
	}
	return s, nil
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

// Why runs `policy-extender why NAME` against the service and returns its text.
func (s *Service) Why(command []string, name string) (string, error) {
	args := append(append([]string{}, command[1:]...), "why", name, "--url", s.URL)
	out, err := exec.Command(command[0], args...).CombinedOutput()
	return string(out), err
}
