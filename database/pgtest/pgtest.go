// Package pgtest runs a throwaway PostgreSQL cluster for tests: initdb into
// a private temporary directory, a free loopback port, its unix socket in
// that directory, stopped and removed by Stop. No server is assumed to run.
// PostgreSQL refuses to run as root, so under root the cluster runs as the
// postgres system user (runuser), which owns the directory.
//
// The binaries come from Debian's postgresql package, which
// scripts/install-test-deps installs.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for admin statements
)

// Cluster is a running throwaway PostgreSQL cluster.
type Cluster struct {
	Dir  string // data directory's parent, removed by Stop
	Port int
	bin  string
	user string // the system user the server runs as; "" for the current one
	mu   sync.Mutex
	cmd  *exec.Cmd
}

var (
	shared     *Cluster
	sharedErr  error
	sharedOnce sync.Once
	dbSeq      atomic.Int64
)

// Main runs a package's tests and stops the shared cluster, if one was
// started, afterwards; call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// URL returns the URL of a new, empty database on the package's shared
// cluster, started on first use.
func URL(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatalf("throwaway PostgreSQL cluster: %v", sharedErr)
	}
	return shared.NewDatabase(t)
}

// Start starts a new cluster; Stop stops it and removes its files.
func Start() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "svc-pg-*")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		c.user = "postgres"
		if err := chownTo(dir, c.user); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := c.command("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--no-sync").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if err := c.Restart(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// binDir finds the directory of initdb and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(p, "--bindir").Output(); err == nil {
			dir := strings.TrimSpace(string(out))
			if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
				return dir, nil
			}
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("PostgreSQL (initdb, postgres) not found: run scripts/install-test-deps")
}

func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("PostgreSQL refuses root and there is no %q user (run scripts/install-test-deps): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

// command runs a PostgreSQL binary as the cluster's user.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.user == "" {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", c.user, "--", path}, args...)...)
}

// Restart starts the server (again, after Kill) on a free port, or the
// port it had, and waits until it accepts connections.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.Port = port
	}
	cmd := c.command("postgres", "-D", c.data(), "-p", strconv.Itoa(c.Port), "-k", c.Dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300",
		"-c", "shared_buffers=32MB")
	log, err := os.Create(filepath.Join(os.TempDir(), filepath.Base(c.Dir)+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd = cmd
	go func() { _ = cmd.Wait(); _ = log.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("pgx", c.url("postgres"))
		if err == nil {
			err = db.Ping()
			_ = db.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60 s (log %s): %w", log.Name(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL to its process group), as a crash
// or a lost network would; Restart brings it back on the same port.
func (c *Cluster) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	c.cmd = nil
	// A killed postmaster leaves its pid file; the next start checks that
	// no process owns its shared memory, which SIGKILL of the group ensures.
	time.Sleep(200 * time.Millisecond)
}

// Stop kills the server and removes the cluster's files.
func (c *Cluster) Stop() {
	c.Kill()
	_ = os.RemoveAll(c.Dir)
}

func (c *Cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// NewDatabase creates an empty database and returns its URL.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	url, err := c.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// CreateDatabase creates an empty database and returns its URL.
func (c *Cluster) CreateDatabase() (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", c.url("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.url(name), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
