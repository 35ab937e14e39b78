package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// opaPrecomputedQuery is the document of a policy pack that holds its values
// depending on its data alone (rego/policy/policy.rego: the data checks, the
// sensitive-action tables as text), which OPA would otherwise compute anew
// for every query.
const opaPrecomputedQuery = "data.svc.policy.precomputed"

// opaPrecomputedPath is where, under the directory of svc's own files
// (dir/batch), the server finds those values: data.svc_internal.precomputed.
var opaPrecomputedPath = filepath.Join("svc_internal", "precomputed", "data.json")

// precompute evaluates the pack's precomputed document once, with `opa
// eval` on the same files, and writes it where the server loads it beside
// the pack, so that every query reads those values instead of computing
// them. Only a pack that cannot change while the server runs gets it: svc's
// bundled pack, which the server does not watch (a watched pack is reloaded
// by OPA on its own, and values computed before would then describe other
// data). A pack without the document gets nothing. Any failure leaves the
// file out and is logged: the pack then computes each value itself, as it
// does in eval mode, so the verdicts are the same either way.
func (s *OPAServer) precompute(ctx context.Context) {
	if s.cfg.Watch {
		return
	}
	value, err := evalDocument(ctx, s.cfg.Bin, s.cfg.PolicyDir, opaPrecomputedQuery)
	if err == nil && value != nil {
		err = writePrecomputed(filepath.Join(s.dir, "batch", opaPrecomputedPath), value)
	}
	switch {
	case err != nil:
		s.cfg.Logger.Warn().Err(err).Msg("policy values that depend on data alone are computed for every query")
	case value == nil:
		s.cfg.Logger.Debug().Msg("the policy pack has no precomputed document")
	default:
		s.cfg.Logger.Debug().Msg("policy values that depend on data alone computed once for the server")
	}
}

// evalDocument returns the value of query on the pack in dir, as `opa eval`
// computes it: a JSON object, or nil when the document is undefined. The
// process runs in its own process group, killed when ctx ends.
func evalDocument(ctx context.Context, bin, dir, query string) (json.RawMessage, error) {
	p, err := startOPA(bin, opaEnv(os.Environ()), "eval", "--format", "json", "--strict-builtin-errors", "--data", dir, query)
	if err != nil {
		return nil, err
	}
	out, err := p.finish(ctx, nil, opaReadyTimeout)
	if err != nil {
		return nil, err
	}
	value, defined, err := evalValue(out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("opa eval %s: %w", query, err)
	case !defined:
		return nil, nil
	case !bytes.HasPrefix(bytes.TrimSpace(value), []byte("{")):
		return nil, errors.New("opa eval " + query + ": the document is not an object")
	}
	return value, nil
}

// writePrecomputed writes value to path, creating its directories. A write
// that fails leaves no file: a partial one would keep the server from
// loading at all.
func writePrecomputed(path string, value json.RawMessage) error {
	if err := writeOwnFile(path, value); err != nil {
		return fmt.Errorf("write precomputed policy values: %w", err)
	}
	return nil
}

// writeOwnFile writes one of svc's own files of the server's private
// directory (mode 600, its directories 700), leaving none when the write
// fails.
func writeOwnFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}
