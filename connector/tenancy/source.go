package tenancy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Source holds the tenancy map in force and reloads it from its file when
// the file changes. A file that stops being valid leaves the last good map
// in force; the problem shows in Status until a valid file replaces it.
type Source struct {
	path string

	mu     sync.RWMutex
	m      *Map
	digest [sha256.Size]byte
	err    error
	loaded time.Time
}

// Status is what health shows of the tenancy map.
type Status struct {
	Loaded   bool   `json:"loaded"`
	Orgs     int    `json:"orgs"`
	Path     string `json:"path,omitempty"`
	LoadedAt string `json:"loaded_at,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ErrNoMap is the status of a connector started without a tenancy map.
var ErrNoMap = errors.New("no tenancy map configured (SVC_GATEWAY_TENANCY_MAP_FILE is unset): every caller is refused as unmapped")

// Open reads the map at path. An empty path gives a Source without a map,
// which binds nobody. A file that cannot be read or is invalid is an error:
// the first map must be good.
func Open(path string) (*Source, error) {
	s := &Source{path: path}
	if path == "" {
		s.err = ErrNoMap
		return s, nil
	}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Map is the map in force, nil when none was ever loaded.
func (s *Source) Map() *Map {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m
}

// Status reports the map in force and the last reload problem.
func (s *Source) Status() Status {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Status{Loaded: s.m != nil, Orgs: s.m.Orgs(), Path: s.path}
	if !s.loaded.IsZero() {
		st.LoadedAt = s.loaded.UTC().Format(time.RFC3339)
	}
	if s.err != nil {
		st.Error = s.err.Error()
	}
	return st
}

// Reload reads the file again; changed reports whether a new map took
// effect. An unreadable or invalid file keeps the map in force and is
// returned (and shown in Status).
func (s *Source) Reload() (changed bool, err error) {
	raw, err := readFile(s.path)
	if err == nil {
		digest := sha256.Sum256(raw)
		s.mu.RLock()
		same := s.m != nil && digest == s.digest
		s.mu.RUnlock()
		if same {
			s.setErr(nil)
			return false, nil
		}
		var m *Map
		if m, err = Parse(raw); err == nil {
			s.mu.Lock()
			s.m, s.digest, s.err, s.loaded = m, digest, nil, time.Now()
			s.mu.Unlock()
			return true, nil
		}
	}
	err = fmt.Errorf("tenancy map %s: %w", s.path, err)
	s.setErr(err)
	return false, err
}

func (s *Source) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// Watch reloads the file every interval until ctx ends, calling report
// after each reload that changed the map, and after one that failed
// otherwise than the reload before it: a file left invalid is reported
// once, not at every interval (Status shows the error meanwhile).
func (s *Source) Watch(ctx context.Context, interval time.Duration, report func(changed bool, err error)) {
	if s.path == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	reported := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			changed, err := s.Reload()
			switch {
			case err != nil && err.Error() != reported:
				reported = err.Error()
				report(false, err)
			case err == nil:
				reported = ""
				if changed {
					report(true, nil)
				}
			}
		}
	}
}

// readFile reads a regular file of at most MaxFile bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxFile {
		return nil, fmt.Errorf("larger than %d bytes", MaxFile)
	}
	return raw, nil
}
