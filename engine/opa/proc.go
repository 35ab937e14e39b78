package opa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// opaProc is one opa process, started and waiting for its standard input.
// `opa eval --stdin-input` starts its runtime and reads its whole input
// before it loads the policy pack (OPA 1.x: rego.Load runs in
// PrepareForEval, after setupEval read stdin), so a process started ahead
// of a decision still decides with the pack on disk when the input arrives
// (TestEvalSpareReadsPackAfterInput pins this on the real binary).
type opaProc struct {
	name    string // opa's subcommand, for the errors
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *opaOutput
	stderr  *opaOutput
	done    chan struct{} // closed when Wait has returned, waitErr then set
	waitErr error
}

// startOPA starts bin with args and the environment env in its own process
// group (killed by the kernel should svc die first), its output kept within
// bounds.
func startOPA(bin string, env []string, args ...string) (*opaProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	p := &opaProc{
		name: args[0], cmd: cmd, done: make(chan struct{}),
		stdout: &opaOutput{limit: opaMaxOutput}, stderr: &opaOutput{limit: opaMaxSnippet},
	}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.SysProcAttr = opaProcAttr()
	cmd.WaitDelay = opaWaitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("run opa %q: %w", bin, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run opa %q: %w", bin, err)
	}
	p.stdin = stdin
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *opaProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill kills the process group and waits for the process to be reaped.
func (p *opaProc) kill() {
	_ = killProcessGroup(p.cmd.Process.Pid)
	<-p.done
}

// finish writes input (nil: none) to the process, closes its standard input
// and returns what it printed once it exited 0. It kills the process group
// when ctx ends or timeout passes first; every fault is an error.
func (p *opaProc) finish(ctx context.Context, input []byte, timeout time.Duration) ([]byte, error) {
	go func() {
		// A failed write is an opa that exited or was killed without
		// reading its input, which its exit status and output tell; Wait
		// closes the pipe once it exited, so the write always returns.
		if input != nil {
			_, _ = p.stdin.Write(input)
		}
		_ = p.stdin.Close()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case <-p.done:
	case <-ctx.Done():
		cause = fmt.Errorf("opa %s canceled: %w", p.name, ctx.Err())
	case <-timer.C:
		cause = fmt.Errorf("opa %s timed out after %s: %w", p.name, timeout, context.DeadlineExceeded)
	}
	if cause != nil {
		p.kill()
		return nil, cause
	}
	return p.output()
}

// output judges an exited process: its stdout when it exited 0 and printed
// within bounds.
func (p *opaProc) output() ([]byte, error) {
	err := p.waitErr
	if errors.Is(err, exec.ErrWaitDelay) {
		// opa exited but left a child holding its output: reap the group.
		_ = killProcessGroup(p.cmd.Process.Pid)
	}
	switch {
	case err == nil && p.stdout.over:
		return nil, fmt.Errorf("opa %s printed more than %d bytes", p.name, opaMaxOutput)
	case err == nil:
		return p.stdout.buf.Bytes(), nil
	}
	return nil, fmt.Errorf("opa %s failed: %w: %s", p.name, err, failureSnippet(p.stderr, p.stdout))
}

// sparePool keeps up to size opa processes started ahead of the decisions
// that will take them, so that a decision does not wait for opa's start.
type sparePool struct {
	start    func() (*opaProc, error)
	size     int
	mu       sync.Mutex
	ready    []*opaProc
	starting int
	adding   sync.WaitGroup // the add goroutines in flight
	closed   bool
}

// take returns the oldest spare still running, or nil; spares that died
// while waiting are dropped.
func (s *sparePool) take() *opaProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ready) > 0 {
		p := s.ready[0]
		s.ready = s.ready[1:]
		if !p.exited() {
			return p
		}
	}
	return nil
}

// refill starts, in the background, the spares missing from the pool.
func (s *sparePool) refill() {
	s.mu.Lock()
	missing := s.size - len(s.ready) - s.starting
	if s.closed || missing <= 0 {
		s.mu.Unlock()
		return
	}
	s.starting += missing
	s.adding.Add(missing)
	s.mu.Unlock()
	for range missing {
		go s.add()
	}
}

// add starts one spare and keeps it, or kills it when the pool was closed
// meanwhile. A spare that fails to start is not kept: the decision that
// finds the pool empty starts its own process and reports the fault.
func (s *sparePool) add() {
	defer s.adding.Done()
	p, err := s.start()
	s.mu.Lock()
	s.starting--
	keep := err == nil && !s.closed
	if keep {
		s.ready = append(s.ready, p)
	}
	s.mu.Unlock()
	if err == nil && !keep {
		p.kill()
	}
}

// close kills every spare, waits for those being started and starts no
// more.
func (s *sparePool) close() {
	s.mu.Lock()
	ready := s.ready
	s.ready, s.closed = nil, true
	s.mu.Unlock()
	for _, p := range ready {
		p.kill()
	}
	s.adding.Wait()
}
