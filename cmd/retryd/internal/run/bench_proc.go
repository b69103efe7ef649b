package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// How long the bench waits for a retryd process to become ready, and to
// stop after SIGTERM (its shutdown grace is 10 s by default).
const (
	readyTimeout = time.Minute
	stopTimeout  = 30 * time.Second
)

// retrydProc is a retryd serve process the bench started.
type retrydProc struct {
	cmd     *exec.Cmd
	addr    string // host:port of its API
	logPath string // its stdout and stderr
	logf    *os.File
	done    chan struct{} // closed once it exited
	waitErr error         // how it exited; read after done
}

// startRetryd starts this binary as `retryd serve` on a free loopback port
// with the store flags args and env added to its environment, allowing
// loopback targets only, and waits
// until /readyz answers 200.
func startRetryd(ctx context.Context, storeArgs, env []string, workers int, logPath string) (*retrydProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("retryd log: %w", err)
	}
	p := &retrydProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), logPath: logPath, logf: logf, done: make(chan struct{})}
	args := append([]string{"serve", "--listen", p.addr, "--allow-target", "127.0.0.1/32",
		"--workers", strconv.Itoa(workers)}, storeArgs...)
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(childEnv(os.Environ()), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start retryd: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		p.kill()
		return nil, fmt.Errorf("retryd did not become ready: %w (its log: %s%s)", err, logPath, p.logTail())
	}
	return p, nil
}

// childEnv is env without RETRYD_* variables, so that only the bench's
// flags configure the retryd it measures (a RETRYD_TOKENS_FILE would turn
// authentication on, say).
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "RETRYD_") {
			out = append(out, kv)
		}
	}
	return out
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before retryd listens: retryd then exits and the bench says why.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (p *retrydProc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("it exited: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *retrydProc) stop() error {
	defer p.logf.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.kill()
		return fmt.Errorf("stop retryd: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
		return fmt.Errorf("retryd did not stop within %v of SIGTERM; killed it (its log: %s)", stopTimeout, p.logPath)
	}
	if p.waitErr != nil {
		return fmt.Errorf("retryd exited with %w (its log: %s%s)", p.waitErr, p.logPath, p.logTail())
	}
	return nil
}

// kill ends the process at once, for when something already went wrong.
func (p *retrydProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.logf.Close()
}

// logTail is the end of the process's log, to show why it failed.
func (p *retrydProc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-5):]
	return "; it ends:\n  " + string(bytes.Join(lines, []byte("\n  ")))
}

// cpu is the CPU time the process has used, read from /proc/<pid>/stat;
// false where there is no /proc.
func (p *retrydProc) cpu() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	// /proc counts in USER_HZ ticks, 100 a second on Linux whatever the
	// kernel's own HZ.
	return time.Duration(utime+stime) * (time.Second / 100), true
}
